-- Where each step's full log went (docs/artifacts.md, "Logs that outlive pods"): the artifact
-- repository (its endpoint and bucket, as the operator's messages name it) and, per step id,
-- the object key of each attempt's log, first attempt first. NULL: the run stored no logs (no
-- repository), or a row archived before this column. Added in place: existing rows keep NULL.
ALTER TABLE planops_runs ADD COLUMN IF NOT EXISTS stored_logs jsonb;

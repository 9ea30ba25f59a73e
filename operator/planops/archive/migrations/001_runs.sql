-- The finished runs of Plans, one row per run. A run id is unique within its Plan (a digest of
-- the Plan's uid, generation and run number), so the key is the Plan's uid with the run id: two
-- Plans' run ids may collide (ten hex digits), their uids never do.
CREATE TABLE planops_runs (
    plan_uid         text        NOT NULL,
    run_id           text        NOT NULL,
    namespace        text        NOT NULL,
    name             text        NOT NULL,
    generation       bigint,
    phase            text        NOT NULL,
    capsule          text,
    created_by       text,
    labels           jsonb       NOT NULL DEFAULT '{}'::jsonb,
    spec_digest      text,
    spec             jsonb,
    inputs           jsonb,
    report           jsonb       NOT NULL,
    failed_step      text,
    started_at       timestamptz,
    finished_at      timestamptz,
    duration_seconds double precision,
    archived_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (plan_uid, run_id)
);

-- `kubectl plan history`: a namespace's runs newest first, one Plan's, one Capsule's.
CREATE INDEX planops_runs_namespace_finished ON planops_runs (namespace, finished_at DESC);
CREATE INDEX planops_runs_name_finished ON planops_runs (namespace, name, finished_at DESC);
CREATE INDEX planops_runs_capsule_finished ON planops_runs (namespace, capsule, finished_at DESC);

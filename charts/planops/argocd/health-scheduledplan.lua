-- Argo CD health of a planops ScheduledPlan or ClusterScheduledPlan
-- (resource.customizations.health.planops.dev_ScheduledPlan / _ClusterScheduledPlan).
-- Invalid -> Degraded, suspended -> Suspended, otherwise Healthy (a failed run is the run's
-- Plan's health, not the schedule's).
local hs = {}
local st = obj.status
if obj.spec ~= nil and obj.spec.suspend == true then
  hs.status = "Suspended"
  hs.message = "Suspended: no new runs start"
  return hs
end
if st == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the planops operator to pick the schedule up"
  return hs
end
if st.conditions ~= nil then
  for _, c in ipairs(st.conditions) do
    if c.type == "Ready" and c.status == "False" then
      hs.status = "Degraded"
      hs.message = "Invalid: " .. (c.message or "")
      return hs
    end
  end
end
hs.status = "Healthy"
local active = st.activeCount or 0
hs.message = "Next run " .. (st.nextScheduleTime or "unknown") .. "; " .. tostring(active) .. " active"
return hs

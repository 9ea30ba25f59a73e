-- Argo CD health of a planops Plan (resource.customizations.health.planops.dev_Plan).
-- Pending/Running -> Progressing, Succeeded -> Healthy, Failed/Invalid -> Degraded.
local hs = {}
local st = obj.status
if st == nil or st.phase == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the planops operator to pick the plan up"
  return hs
end
local cond = nil
if st.conditions ~= nil then
  for _, c in ipairs(st.conditions) do
    if c.type == "Succeeded" then cond = c end
  end
end
local detail = ""
if cond ~= nil and cond.message ~= nil and cond.message ~= "" then detail = ": " .. cond.message end
if obj.metadata ~= nil and obj.metadata.generation ~= nil and st.observedGeneration ~= nil
    and st.observedGeneration < obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "A new generation of the plan is starting"
  return hs
end
local progress = st.progress or "?"
if st.phase == "Succeeded" then
  hs.status = "Healthy"
  hs.message = "Succeeded (" .. progress .. " steps)"
elseif st.phase == "Failed" then
  hs.status = "Degraded"
  hs.message = "Failed (" .. progress .. " steps)" .. detail
elseif st.phase == "Invalid" then
  hs.status = "Degraded"
  hs.message = "Invalid, nothing runs" .. detail
elseif st.phase == "Pending" or st.phase == "Running" then
  hs.status = "Progressing"
  hs.message = st.phase .. " (" .. progress .. " steps settled)"
else
  hs.status = "Unknown"
  hs.message = "Unknown phase " .. tostring(st.phase)
end
return hs

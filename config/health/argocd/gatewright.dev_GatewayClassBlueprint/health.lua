-- Argo CD health of a gatewright.dev GatewayClassBlueprint
-- (argocd-cm key resource.customizations.health.gatewright.dev_GatewayClassBlueprint).
--   no status yet, or status.observedGeneration (or Accepted's) below metadata.generation
--   (the controller has not checked this generation yet)                  -> Progressing
--   Accepted=False/InvalidTemplate (a template does not compile, reads an unknown
--   variable or a missing template, or the templates form a cycle)        -> Degraded
--   Progressing=False (RolloutHalted, RolledBack: a wave of the rollout of its newest
--   revision did not pass its gate)                                        -> Degraded
--   Progressing=True/Paused (rolloutPolicy.paused)                         -> Suspended
--   Progressing=True/WaveProgressing (a rollout in waves is under way)     -> Progressing
--   Accepted=True                                                          -> Healthy
local hs = {}
local generation = 0
if obj.metadata ~= nil and obj.metadata.generation ~= nil then
  generation = obj.metadata.generation
end
local status = obj.status or {}
local accepted = nil
local progressing = nil
for _, c in ipairs(status.conditions or {}) do
  if c.type == "Accepted" then
    accepted = c
  end
  if c.type == "Progressing" then
    progressing = c
  end
end

if accepted == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the controller to check the templates"
  return hs
end
local observed = status.observedGeneration or accepted.observedGeneration
if observed == nil or observed < generation or (accepted.observedGeneration or observed) < generation then
  hs.status = "Progressing"
  hs.message = "the controller has not checked generation " .. tostring(generation) .. " yet"
  return hs
end
if accepted.status == "False" then
  hs.status = "Degraded"
  hs.message = "Accepted=False/" .. tostring(accepted.reason) .. ": " .. tostring(accepted.message)
  return hs
end
if accepted.status ~= "True" then
  hs.status = "Progressing"
  hs.message = "Accepted=" .. tostring(accepted.status) .. "/" .. tostring(accepted.reason)
  return hs
end
if progressing ~= nil then
  local why = "Progressing=" .. tostring(progressing.status) .. "/" .. tostring(progressing.reason) .. ": " .. tostring(progressing.message)
  if progressing.status == "False" then
    hs.status = "Degraded"
    hs.message = why
    return hs
  end
  if progressing.reason == "Paused" then
    hs.status = "Suspended"
    hs.message = why
    return hs
  end
  if progressing.reason == "WaveProgressing" then
    hs.status = "Progressing"
    hs.message = why
    return hs
  end
end
hs.status = "Healthy"
hs.message = accepted.message or "every template compiles"
return hs

-- Argo CD health of a gatewright.dev policy: GatewayClassConfig and GatewayConfig share it
-- (argocd-cm keys resource.customizations.health.gatewright.dev_<Kind>;
-- config/health/generate copies it to each kind). A policy's status is GEP-713's
-- status.ancestors: one entry per Gateway it affects (or the object it targets when it
-- affects none), each with an Accepted condition. Only entries of
-- gatewright.dev/gateway-controller are judged; other controllers' entries are ignored.
-- Per entry:
--   no Accepted condition, or one whose observedGeneration is below metadata.generation
--   (the controller has not seen this generation)                          -> Progressing
--   Accepted=False (TargetNotFound: the target does not exist or is not ours;
--   Conflicted: an older policy at the same level targets the same object and applies;
--   Invalid: a targetRef that can never apply)                             -> Degraded
--   Accepted=True                                                          -> Healthy
--   otherwise (Accepted=Unknown)                                           -> Progressing
-- The policy is Degraded when an entry is, else Progressing when an entry is or when no
-- entry is ours yet (no status at all included), else Healthy. A policy created before its
-- Gateway is Degraded (TargetNotFound) until the Gateway exists, then Healthy by itself.
-- Like the other checks, it judges types and statuses, never message text (Argo CD runs
-- scripts from argocd-cm without the string library); messages are only repeated.
local CONTROLLER = "gatewright.dev/gateway-controller"

local hs = {}
local generation = 0
if obj.metadata ~= nil and obj.metadata.generation ~= nil then
  generation = obj.metadata.generation
end
local ancestors = {}
if obj.status ~= nil and obj.status.ancestors ~= nil then
  ancestors = obj.status.ancestors
end

local function describe(c)
  local text = "Accepted=" .. tostring(c.status) .. "/" .. tostring(c.reason)
  if c.message ~= nil and c.message ~= "" then
    text = text .. ": " .. c.message
  end
  return text
end

local function ancestorName(a)
  local ref = a.ancestorRef or {}
  local name = tostring(ref.name)
  if ref.namespace ~= nil then
    name = ref.namespace .. "/" .. name
  end
  return tostring(ref.kind) .. " " .. name
end

local degraded, progressing, accepted = {}, {}, {}
local judged = 0
for _, a in ipairs(ancestors) do
  if a.controllerName == CONTROLLER then
    judged = judged + 1
    -- Accepted conditions of the current generation, and the first of an older one.
    local isTrue, isFalse, stale, current = nil, nil, nil, nil
    for _, c in ipairs(a.conditions or {}) do
      if c.type == "Accepted" then
        if (c.observedGeneration or 0) < generation then
          stale = stale or c
        else
          current = current or c
          if c.status == "False" then
            isFalse = isFalse or c
          elseif c.status == "True" then
            isTrue = isTrue or c
          end
        end
      end
    end
    if isFalse ~= nil then
      table.insert(degraded, ancestorName(a) .. ": " .. describe(isFalse))
    elseif isTrue ~= nil then
      table.insert(accepted, ancestorName(a))
    elseif current ~= nil then
      table.insert(progressing, ancestorName(a) .. ": " .. describe(current))
    elseif stale ~= nil then
      table.insert(progressing, ancestorName(a) .. ": the controller has not seen generation " .. tostring(generation) .. " yet (Accepted is of generation " .. tostring(stale.observedGeneration) .. ")")
    else
      table.insert(progressing, ancestorName(a) .. ": no Accepted condition yet")
    end
  end
end

if #degraded > 0 then
  hs.status = "Degraded"
  hs.message = table.concat(degraded, "; ")
elseif judged == 0 then
  hs.status = "Progressing"
  hs.message = "waiting for a status.ancestors entry of " .. CONTROLLER
elseif #progressing > 0 then
  hs.status = "Progressing"
  hs.message = table.concat(progressing, "; ")
else
  hs.status = "Healthy"
  hs.message = "accepted for " .. table.concat(accepted, ", ")
end
return hs

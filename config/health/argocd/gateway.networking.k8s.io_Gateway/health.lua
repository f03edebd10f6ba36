-- Argo CD health of a gateway.networking.k8s.io Gateway
-- (argocd-cm key resource.customizations.health.gateway.networking.k8s.io_Gateway).
-- Replaces Argo CD's built-in Gateway check, which leaves a Gateway whose template failed
-- Progressing forever. Reads conditions by type and reason (the standard ones, and
-- gatewright's gatewright.dev/* types), so it also judges Gateways of other controllers by
-- the Gateway API's own meaning. In order:
--   1. gatewright.dev/Teardown False/DeletionStuck, current      -> Degraded
--      being deleted otherwise                                     -> Progressing
--   2. Accepted or Programmed missing, or a condition of ours whose observedGeneration is
--      below metadata.generation (the controller has not seen the change yet) -> Progressing
--   3. Accepted=False; Programmed=False/Invalid (a template error, a child another parent
--      or a user's object holds, a kind not served or whose scope contradicts the
--      blueprint); gatewright.dev/FieldConflict=True;
--      gatewright.dev/Rollout=False/Stuck; a listener Accepted=False, ResolvedRefs=False or
--      Conflicted=True                                                        -> Degraded
--   4. Accepted not True, Programmed not True (Pending: children on their way), or
--      gatewright.dev/Rollout=False/Progressing                           -> Progressing
--   5. otherwise                                                          -> Healthy
-- Argo CD reports every object that has a deletionTimestamp as Progressing ("Pending
-- deletion") without running this script; step 1 serves tools that do run it.
-- Argo CD runs scripts from argocd-cm with the base and table libraries only (no string
-- library unless useOpenLibs is set), so this script judges types, statuses and reasons,
-- never message text.
local hs = {}
local generation = 0
if obj.metadata ~= nil and obj.metadata.generation ~= nil then
  generation = obj.metadata.generation
end
local status = obj.status or {}
local conditions = status.conditions or {}

local function find(list, condType)
  for _, c in ipairs(list or {}) do
    if c.type == condType then
      return c
    end
  end
  return nil
end

local function seen(c)
  return c.observedGeneration ~= nil and c.observedGeneration >= generation
end

local function describe(c)
  local text = c.type .. "=" .. tostring(c.status) .. "/" .. tostring(c.reason)
  if c.message ~= nil and c.message ~= "" then
    text = text .. ": " .. c.message
  end
  return text
end

-- The conditions the controller writes on every status write (gatewright.dev/Teardown is
-- written alone, during deletion, and judged in step 1).
local OURS = {
  ["Accepted"] = true,
  ["Programmed"] = true,
  ["gatewright.dev/Rollout"] = true,
  ["gatewright.dev/FieldConflict"] = true,
}

-- 1. Deletion.
local teardown = find(conditions, "gatewright.dev/Teardown")
if teardown ~= nil and teardown.status == "False" and teardown.reason == "DeletionStuck" and seen(teardown) then
  hs.status = "Degraded"
  hs.message = describe(teardown)
  return hs
end
if (obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil) or teardown ~= nil then
  hs.status = "Progressing"
  if teardown ~= nil then
    hs.message = describe(teardown)
  else
    hs.message = "the Gateway is being deleted"
  end
  return hs
end

-- 2. Has the controller seen this generation?
local accepted = find(conditions, "Accepted")
local programmed = find(conditions, "Programmed")
if accepted == nil or programmed == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the controller to report Accepted and Programmed"
  return hs
end
for _, c in ipairs(conditions) do
  if OURS[c.type] and not seen(c) then
    hs.status = "Progressing"
    hs.message = "the controller has not seen generation " .. tostring(generation) .. " yet (" .. c.type .. " is of generation " .. tostring(c.observedGeneration) .. ")"
    return hs
  end
end

-- 3. What will not fix itself.
local failures = {}
if accepted.status == "False" then
  table.insert(failures, describe(accepted))
end
if programmed.status == "False" and programmed.reason == "Invalid" then
  table.insert(failures, describe(programmed))
end
local conflict = find(conditions, "gatewright.dev/FieldConflict")
if conflict ~= nil and conflict.status == "True" then
  table.insert(failures, describe(conflict))
end
local rollout = find(conditions, "gatewright.dev/Rollout")
if rollout ~= nil and rollout.status == "False" and rollout.reason == "Stuck" then
  table.insert(failures, describe(rollout))
end
for _, l in ipairs(status.listeners or {}) do
  for _, c in ipairs(l.conditions or {}) do
    if ((c.type == "Accepted" or c.type == "ResolvedRefs") and c.status == "False")
        or (c.type == "Conflicted" and c.status == "True") then
      table.insert(failures, "listener " .. tostring(l.name) .. ": " .. describe(c))
    end
  end
end
if #failures > 0 then
  hs.status = "Degraded"
  hs.message = table.concat(failures, "; ")
  return hs
end

-- 4. On its way.
if accepted.status ~= "True" then
  hs.status = "Progressing"
  hs.message = describe(accepted)
  return hs
end
if programmed.status ~= "True" then
  hs.status = "Progressing"
  hs.message = describe(programmed)
  return hs
end
if rollout ~= nil and rollout.status == "False" then
  hs.status = "Progressing"
  hs.message = describe(rollout)
  return hs
end

-- 5. Programmed.
hs.status = "Healthy"
hs.message = programmed.message or "Programmed"
return hs

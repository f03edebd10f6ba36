-- Argo CD health of a Gateway API route: HTTPRoute, GRPCRoute, TLSRoute, TCPRoute and
-- UDPRoute share it (argocd-cm keys resource.customizations.health.gateway.networking.k8s.io_<Kind>;
-- config/health/generate copies it to each kind). Only status.parents entries written by
-- the controllers in CONTROLLERS are judged; other controllers' entries are ignored. Per entry:
--   a condition whose observedGeneration is below metadata.generation, or no Accepted
--   (the controller has not seen this generation)                          -> Progressing
--   Accepted=False (refused), ResolvedRefs=False (a backend missing or not permitted),
--   gatewright.dev/Rendered=False (the route's own template failed)        -> Degraded
--   Accepted not True                                                      -> Progressing
--   otherwise                                                              -> Healthy
-- The route is Degraded when an entry is, else Progressing when an entry is or when no
-- entry is ours yet, else Healthy. gatewright.dev/WildcardOnly=True (no generated
-- certificate names the route) is told in a Healthy message: the route is served.
-- This check replaces Argo CD's built-in one for every route of the kind: a route that
-- only other controllers serve stays Progressing unless their controllerName is added.
local CONTROLLERS = {
  ["gatewright.dev/gateway-controller"] = true,
}

local hs = {}
local generation = 0
if obj.metadata ~= nil and obj.metadata.generation ~= nil then
  generation = obj.metadata.generation
end
local parents = {}
if obj.status ~= nil and obj.status.parents ~= nil then
  parents = obj.status.parents
end

local function find(list, condType)
  for _, c in ipairs(list or {}) do
    if c.type == condType then
      return c
    end
  end
  return nil
end

local function describe(c)
  local text = c.type .. "=" .. tostring(c.status) .. "/" .. tostring(c.reason)
  if c.message ~= nil and c.message ~= "" then
    text = text .. ": " .. c.message
  end
  return text
end

local function parentName(p)
  local ref = p.parentRef or {}
  local name = tostring(ref.name)
  if ref.namespace ~= nil then
    name = ref.namespace .. "/" .. name
  end
  if ref.sectionName ~= nil then
    name = name .. "#" .. ref.sectionName
  end
  return (ref.kind or "Gateway") .. " " .. name
end

local degraded, progressing, notes = {}, {}, {}
local judged = 0
for _, p in ipairs(parents) do
  if CONTROLLERS[p.controllerName] then
    judged = judged + 1
    local conditions = p.conditions or {}
    local stale = nil
    for _, c in ipairs(conditions) do
      if c.observedGeneration == nil or c.observedGeneration < generation then
        stale = c
        break
      end
    end
    local accepted = find(conditions, "Accepted")
    if stale ~= nil then
      table.insert(progressing, parentName(p) .. ": the controller has not seen generation " .. tostring(generation) .. " yet (" .. stale.type .. " is of generation " .. tostring(stale.observedGeneration) .. ")")
    elseif accepted == nil then
      table.insert(progressing, parentName(p) .. ": no Accepted condition yet")
    else
      local failed = false
      for _, condType in ipairs({ "Accepted", "ResolvedRefs", "gatewright.dev/Rendered" }) do
        local c = find(conditions, condType)
        if c ~= nil and c.status == "False" then
          table.insert(degraded, parentName(p) .. ": " .. describe(c))
          failed = true
        end
      end
      if not failed and accepted.status ~= "True" then
        table.insert(progressing, parentName(p) .. ": " .. describe(accepted))
      elseif not failed then
        local wildcard = find(conditions, "gatewright.dev/WildcardOnly")
        if wildcard ~= nil and wildcard.status == "True" then
          table.insert(notes, parentName(p) .. ": " .. describe(wildcard))
        end
      end
    end
  end
end

if #degraded > 0 then
  hs.status = "Degraded"
  hs.message = table.concat(degraded, "; ")
elseif judged == 0 then
  hs.status = "Progressing"
  hs.message = "waiting for a status.parents entry of gatewright.dev/gateway-controller"
elseif #progressing > 0 then
  hs.status = "Progressing"
  hs.message = table.concat(progressing, "; ")
else
  hs.status = "Healthy"
  if #notes > 0 then
    hs.message = "accepted; " .. table.concat(notes, "; ")
  else
    hs.message = "accepted by " .. tostring(judged) .. " parent(s) of gatewright.dev/gateway-controller"
  end
end
return hs

-- Argo CD health of a gatewright.dev GatewayConfig
-- (argocd-cm key resource.customizations.health.gatewright.dev_GatewayConfig).
-- A GatewayConfig holds values and has no status of its own: what its values do is
-- reported where it lands, on each Gateway that uses them (Programmed=False/Invalid naming
-- the template, line and cause when a value makes a template fail, and so Degraded by the
-- Gateway check). So it is Healthy once it exists.
local hs = {}
hs.status = "Healthy"
hs.message = "values only; their effect is reported on the Gateways that use them"
return hs

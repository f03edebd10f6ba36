-- Runs an Argo CD health check as Argo CD runs one from argocd-cm, under Lua 5.1:
--   lua5.1 tests/health/argocd.lua CHECKS_DIR OBJECT_LUA
-- OBJECT_LUA returns the object as a table (`celeval lua CASE`: maps and lists as tables,
-- null as nil, as Argo CD converts it). The check is CHECKS_DIR/<group>_<Kind>/health.lua
-- for the object's apiVersion and kind. It runs with the global `obj` set to the object, in
-- the sandbox Argo CD gives scripts from argocd-cm (base and table libraries and a few os
-- functions; no string, math, io or debug library, unless useOpenLibs is set), and strings
-- have no methods there either. Prints "STATUS<TAB>MESSAGE"; exits 1 when the script fails
-- or returns no valid health status.
local checks_dir, object_path = arg[1], arg[2]
if checks_dir == nil or object_path == nil then
  io.stderr:write("usage: lua5.1 argocd.lua CHECKS_DIR OBJECT_LUA\n")
  os.exit(2)
end

local function fail(msg)
  io.stderr:write(msg .. "\n")
  os.exit(1)
end

local load_object, err = loadfile(object_path)
if load_object == nil then
  fail(err)
end
local object = load_object()
local group = ""
if string.find(object.apiVersion, "/", 1, true) then
  group = string.match(object.apiVersion, "^([^/]*)/")
end
local script_path = checks_dir .. "/" .. group .. "_" .. object.kind .. "/health.lua"
local chunk, cerr = loadfile(script_path)
if chunk == nil then
  fail("no health check: " .. tostring(cerr))
end

local env = {}
for _, name in ipairs({ "assert", "error", "getmetatable", "ipairs", "next", "pairs", "pcall",
  "rawequal", "rawget", "rawset", "select", "setmetatable", "tonumber", "tostring", "type",
  "unpack", "xpcall" }) do
  env[name] = _G[name]
end
env.table = { concat = table.concat, insert = table.insert, remove = table.remove,
  sort = table.sort, getn = table.getn, maxn = table.maxn }
env.os = { clock = os.clock, date = os.date, difftime = os.difftime, time = os.time }
env._G = env
env.obj = object
setfenv(chunk, env)

local string_meta = getmetatable("")
local string_index = string_meta.__index
string_meta.__index = nil
local ok, hs = pcall(chunk)
string_meta.__index = string_index
if not ok then
  fail(script_path .. " failed: " .. tostring(hs))
end

local valid = { Healthy = true, Progressing = true, Degraded = true, Suspended = true,
  Missing = true, Unknown = true }
if type(hs) ~= "table" or not valid[hs.status] then
  fail(script_path .. " returned no valid health status")
end
local message = string.gsub(tostring(hs.message or ""), "%s+", " ")
print(hs.status .. "\t" .. message)

-- Small helpers shared by the adapters: `local U = require("util")`.
local U = {}
U.null = json.null
-- nil or JSON null
function U.isnil(v) return v == nil or v == U.null end
-- the string, or "" for anything else
function U.str(v) return type(v) == "string" and v or "" end
-- an integer (floats are floored), 0 for anything else
function U.int(v) return type(v) == "number" and (math.tointeger(v) or math.floor(v)) or 0 end
-- the table, or an empty one
function U.list(v) return type(v) == "table" and v or {} end
-- a JSON object (not an array; `{}` counts)
function U.is_object(v)
  return type(v) == "table" and v[1] == nil and (next(v) ~= nil or json.encode(v) == "{}")
end
-- tool-call arguments (a table or a JSON string) as an object, `{}` when not an object
function U.parse_args(v)
  if type(v) == "table" then return U.is_object(v) and v or {} end
  local d = json.decode(U.str(v) ~= "" and v or "{}")
  if U.is_object(d) then return d end
  return {}
end
return U

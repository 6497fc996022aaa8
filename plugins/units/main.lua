-- units: a bundled example of a Lua plugin.
--
-- It shows the shape of a script plugin: registrations at load time, a start and a
-- stop hook, logging, a tool that returns text and one that fails with `nil, err`.
-- Language models are unreliable at arithmetic; this tool converts exactly.

local M = {}

-- Every unit of a dimension as a factor to its base unit (temperature is special).
local DIMENSIONS = {
  length = {
    m = 1, km = 1000, cm = 0.01, mm = 0.001, um = 1e-6, nm = 1e-9,
    mi = 1609.344, yd = 0.9144, ft = 0.3048, ["in"] = 0.0254, nmi = 1852,
  },
  mass = {
    kg = 1, g = 0.001, mg = 1e-6, t = 1000, lb = 0.45359237, oz = 0.028349523125,
    st = 6.35029318, jin = 0.5, liang = 0.05,
  },
  volume = {
    l = 1, ml = 0.001, m3 = 1000, cm3 = 0.001, gal = 3.785411784, qt = 0.946352946,
    pt = 0.473176473, cup = 0.2365882365, floz = 0.0295735295625, tbsp = 0.01478676478125,
    tsp = 0.00492892159375,
  },
  speed = { ["m/s"] = 1, ["km/h"] = 1 / 3.6, mph = 0.44704, kn = 1852 / 3600, ["ft/s"] = 0.3048 },
  data = {
    b = 1, kb = 1e3, mb = 1e6, gb = 1e9, tb = 1e12,
    kib = 1024, mib = 1024 ^ 2, gib = 1024 ^ 3, tib = 1024 ^ 4, bit = 1 / 8,
  },
  time = { s = 1, ms = 0.001, min = 60, h = 3600, d = 86400, wk = 604800 },
  area = { m2 = 1, km2 = 1e6, cm2 = 1e-4, ha = 1e4, acre = 4046.8564224, ft2 = 0.09290304, mu = 10000 / 15 },
}

-- Spellings people use, mapped to the keys above.
local ALIASES = {
  meter = "m", meters = "m", metre = "m", kilometer = "km", kilometers = "km", mile = "mi", miles = "mi",
  foot = "ft", feet = "ft", inch = "in", inches = "in", yard = "yd", yards = "yd",
  kilogram = "kg", kilograms = "kg", gram = "g", grams = "g", pound = "lb", pounds = "lb", lbs = "lb",
  ounce = "oz", ounces = "oz", stone = "st", tonne = "t", ["斤"] = "jin", ["两"] = "liang", ["公斤"] = "kg",
  liter = "l", liters = "l", litre = "l", gallon = "gal", gallons = "gal", ["升"] = "l", ["毫升"] = "ml",
  kph = "km/h", kmh = "km/h", knot = "kn", knots = "kn",
  second = "s", seconds = "s", minute = "min", minutes = "min", hour = "h", hours = "h", day = "d", days = "d",
  week = "wk", weeks = "wk", ["亩"] = "mu", hectare = "ha",
  c = "c", celsius = "c", f = "f", fahrenheit = "f", k = "k", kelvin = "k",
}

local TEMPERATURE = {
  c = { to = function(v) return v + 273.15 end, from = function(k) return k - 273.15 end },
  f = { to = function(v) return (v - 32) * 5 / 9 + 273.15 end, from = function(k) return (k - 273.15) * 9 / 5 + 32 end },
  k = { to = function(v) return v end, from = function(k) return k end },
}

local function normalise(unit)
  local u = string.lower((unit or ""):gsub("%s+", ""):gsub("°", ""))
  return ALIASES[u] or u
end

local function find(unit)
  for dim, units in pairs(DIMENSIONS) do
    if units[unit] then return dim, units[unit] end
  end
  return nil
end

-- Converts; returns the number, or nil and a message that says what is accepted.
function M.convert(value, from, to)
  local f, t = normalise(from), normalise(to)
  if TEMPERATURE[f] or TEMPERATURE[t] then
    if not (TEMPERATURE[f] and TEMPERATURE[t]) then
      return nil, "temperature converts only between c, f and k"
    end
    return TEMPERATURE[t].from(TEMPERATURE[f].to(value))
  end
  local df, ff = find(f)
  local dt, ft = find(t)
  if not df then return nil, "unknown unit `" .. tostring(from) .. "`" end
  if not dt then return nil, "unknown unit `" .. tostring(to) .. "`" end
  if df ~= dt then
    return nil, "cannot convert " .. df .. " (" .. from .. ") to " .. dt .. " (" .. to .. ")"
  end
  return value * ff / ft
end

local function pretty(n)
  if n == math.floor(n) and math.abs(n) < 1e15 then return string.format("%d", n) end
  local s = string.format("%.6g", n)
  return s
end

local function known_units()
  local lines = {}
  for dim, units in pairs(DIMENSIONS) do
    local names = {}
    for u in pairs(units) do names[#names + 1] = u end
    table.sort(names)
    lines[#lines + 1] = dim .. ": " .. table.concat(names, ", ")
  end
  table.sort(lines)
  lines[#lines + 1] = "temperature: c, f, k"
  return table.concat(lines, "\n")
end

sdk.register_tool("units_convert", {
  description = "Convert a quantity between units exactly (length, mass, volume, area, temperature, speed, data size, time). Use it instead of converting in your head.",
  -- Words a person may use (matched to decide whether a request offers the tool; not sent).
  keywords = { "convert", "how many", "how much is", "km", "kilometres", "kilometers", "miles", "metres", "meters",
    "feet", "foot", "inches", "cm", "kg", "kilograms", "pounds", "lbs", "ounces", "grams", "litres", "liters",
    "gallons", "cups", "tablespoons", "millilitres", "milliliters", "ml", "celsius", "fahrenheit", "degrees",
    "mph", "knots", "bytes", "gb", "mb", "acres", "hectares", "换算", "转换", "英里", "公里", "米", "英尺",
    "英寸", "公斤", "千克", "磅", "摄氏", "华氏", "升", "毫升", "多少" },
  parameters = {
    type = "object",
    properties = {
      value = { type = "number", description = "The quantity to convert" },
      from = { type = "string", description = "Unit of the value, e.g. mi, kg, °F, GiB, 斤" },
      to = { type = "string", description = "Target unit" },
    },
    required = { "value", "from", "to" },
  },
  parallel_safe = true,
}, function(args)
  local value = tonumber(args.value)
  if not value then return nil, "`value` must be a number" end
  local out, err = M.convert(value, args.from, args.to)
  if not out then return nil, err .. "; call units_list for the known units" end
  return pretty(value) .. " " .. args.from .. " = " .. pretty(out) .. " " .. args.to
end)

sdk.register_tool("units_list", {
  description = "List the units units_convert knows, by dimension.",
  keywords = { "units", "measures", "which units", "单位" },
  parameters = { type = "object", properties = {} },
  parallel_safe = true,
  no_memory = true,
}, function() return known_units() end)

function M.start(s)
  s.log("info", "units ready")
end

function M.stop()
  sdk.log("info", "units stopped")
end

return M

-- A Lua plugin for the tests: one tool, one stage handler, and a tool that never ends
-- (the sandbox's instruction budget must stop it).
local M = {}

sdk.register_tool("greeter_hello", {
  description = "Say hello to someone",
  parameters = {type = "object", properties = {name = {type = "string"}}},
  parallel_safe = true,
}, function(args)
  return "hello, " .. (args.name or "stranger")
end)

sdk.register_tool("greeter_spin", {description = "Never returns"}, function(args)
  while true do end
end)

-- A hostile script's two ways around the budget: a pcall loop that would swallow the
-- abort, and a catastrophic pattern inside the C matcher (no hook runs there).
sdk.register_tool("greeter_pcall_spin", {description = "Never returns, catching every error"}, function(args)
  while true do pcall(function() while true do end end) end
end)

sdk.register_tool("greeter_pattern", {description = "A pattern that backtracks for hours"}, function(args)
  return tostring(string.find(string.rep("a", 60), string.rep("a*", 60) .. "b"))
end)

-- Within every guard and still minutes of C code (the matcher is never interrupted):
-- only the call's deadline and a restart on a fresh thread end it.
sdk.register_tool("greeter_slow", {description = "A long search in C code"}, function(args)
  local s = string.rep("a", 99999)
  for i = 1, 20 do string.find(s, ".-b") end
  return "done"
end)

-- What memory keeps (issue 33 item 6): the channel's and the tool's templates go.
sdk.register_input_channel("", {cleaner = {rules = {{pattern = "^<<greeter>> ", replace = ""}}}})

sdk.register_tool("greeter_card", {
  description = "A card behind a template header",
  cleaner = {rules = {{pattern = "^\\[CARD v\\d+\\] ", replace = ""}}},
}, function(args)
  return "[CARD v2] hello card"
end)

sdk.register_tool("greeter_tell", {description = "Says a line on the greeter channel"}, function(args)
  sdk.inject_text("<<greeter>> " .. (args.text or ""))
  return "told"
end)

sdk.register_stage("before_output", function(ctx)
  ctx.final_text = ctx.final_text .. " (greeted)"
end)

function M.start(s)
  s.log("info", "greeter started")
end

return M

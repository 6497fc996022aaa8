-- DeepSeek adapter (OpenAI-compatible, POST <base_url>/chat/completions).
-- Quirks:
--  * disable_thinking=true becomes `thinking: {type: "disabled"}` (unless extra_body
--    already chose a `thinking` value); disable_thinking itself is not sent;
--  * reasoning_content in history is kept (thinking-mode tool calls need it back);
--  * responses carry reasoning_content; streaming asks for stream_options.include_usage.
local CFG = {
  name = "deepseek",
  version = "2.0.0",
  endpoint = "/chat/completions",
  default_model = "deepseek-chat",
  keep_disable_thinking = false,
  strip_reasoning = false,
  stream_usage = true,
  headers = {["Content-Type"] = "application/json"},
}

local function prepare(req)
  if req.disable_thinking == true and req.thinking == nil then
    req.thinking = {type = "disabled"}
  end
end

-- The OpenAI-compatible request/response/stream mapping is shared: lua/lib/openai_compat.lua.
return require("openai_compat")(CFG, prepare)

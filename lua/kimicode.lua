-- Moonshot Kimi (code) adapter (OpenAI-compatible, POST <base_url>/v1/chat/completions).
-- Quirks: reasoning_content is stripped from outgoing messages; responses may carry
-- reasoning_content; the last stream chunk carries usage inside choices[0].usage.
local CFG = {
  name = "kimicode",
  version = "2.0.0",
  endpoint = "/v1/chat/completions",
  default_model = "kimi-k2",
  keep_disable_thinking = false,
  strip_reasoning = true,
  stream_usage = false,
  headers = {["Content-Type"] = "application/json"},
}

local function prepare(req) end

-- The OpenAI-compatible request/response/stream mapping is shared: lua/lib/openai_compat.lua.
return require("openai_compat")(CFG, prepare)

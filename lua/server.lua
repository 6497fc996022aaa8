-- "zen"-style OpenAI-compatible gateway adapter (POST <base_url>/chat/completions).
-- The gateway understands HomeAgent's own fields: disable_thinking is kept, and so is
-- reasoning_content in history. extra_body keys are merged into the top level.
-- Responses: full usage and streaming tool calls, OpenAI wire format.
local CFG = {
  name = "server",
  version = "2.0.0",
  endpoint = "/chat/completions",
  default_model = nil,
  keep_disable_thinking = true,
  strip_reasoning = false,
  stream_usage = false,
  headers = {["Content-Type"] = "application/json"},
}

local function prepare(req) end

-- The OpenAI-compatible request/response/stream mapping is shared: lua/lib/openai_compat.lua.
return require("openai_compat")(CFG, prepare)

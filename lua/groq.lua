-- Groq adapter (OpenAI-compatible, POST <base_url>/openai/v1/chat/completions;
-- base_url https://api.groq.com).
-- Quirks: Groq rejects unknown message properties, so reasoning_content is removed
-- from history; reasoning models answer in `reasoning`; the last stream chunk
-- carries usage under `x_groq.usage`.
local CFG = {
  name = "groq",
  version = "2.0.0",
  endpoint = "/openai/v1/chat/completions",
  default_model = "llama3-70b-8192",
  keep_disable_thinking = false,
  strip_reasoning = true,
  stream_usage = false,
  headers = {["Content-Type"] = "application/json"},
}

local function prepare(req) end

-- The OpenAI-compatible request/response/stream mapping is shared: lua/lib/openai_compat.lua.
return require("openai_compat")(CFG, prepare)

-- GitHub Models adapter (Azure AI inference, OpenAI-compatible,
-- POST <base_url>/chat/completions; base_url e.g. https://models.github.ai/inference).
-- Quirks: reasoning_content is removed from history (the inference API rejects
-- unknown message fields); the GitHub API version header is sent.
local CFG = {
  name = "github",
  version = "2.0.0",
  endpoint = "/chat/completions",
  default_model = "gpt-4o",
  keep_disable_thinking = false,
  strip_reasoning = true,
  stream_usage = false,
  headers = {["Content-Type"] = "application/json", ["X-GitHub-Api-Version"] = "2022-11-28"},
}

local function prepare(req) end

-- The OpenAI-compatible request/response/stream mapping is shared: lua/lib/openai_compat.lua.
return require("openai_compat")(CFG, prepare)

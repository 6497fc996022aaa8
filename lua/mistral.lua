-- Mistral adapter (OpenAI-compatible, POST <base_url>/v1/chat/completions;
-- base_url https://api.mistral.ai).
-- Quirks:
--  * Mistral rejects unknown fields (422), so reasoning_content is removed from history;
--  * tool call ids must be exactly 9 characters [a-zA-Z0-9]: ids from other vendors
--    (e.g. "call_…" after a fallback) are rewritten to the first 9 hex digits of their
--    SHA-256, the same way in assistant tool_calls and in tool messages;
--  * reasoning models (magistral) answer with content as a list of
--    {type:"thinking"} / {type:"text"} parts; usage comes in the last stream chunk.
local CFG = {
  name = "mistral",
  version = "2.0.0",
  endpoint = "/v1/chat/completions",
  default_model = "mistral-large-latest",
  keep_disable_thinking = false,
  strip_reasoning = true,
  stream_usage = false,
  headers = {["Content-Type"] = "application/json"},
}

local function mistral_id(id)
  if type(id) ~= "string" then return id end
  if #id == 9 and not id:find("[^%w]") then return id end
  return sha256_hex(id):sub(1, 9)
end

local function prepare(req)
  if type(req.messages) ~= "table" then return end
  for _, m in ipairs(req.messages) do
    if type(m) == "table" then
      if type(m.tool_call_id) == "string" then m.tool_call_id = mistral_id(m.tool_call_id) end
      if type(m.tool_calls) == "table" then
        for _, tc in ipairs(m.tool_calls) do
          if type(tc) == "table" then tc.id = mistral_id(tc.id) end
        end
      end
    end
  end
end

-- The OpenAI-compatible request/response/stream mapping is shared: lua/lib/openai_compat.lua.
return require("openai_compat")(CFG, prepare)

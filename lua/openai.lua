-- OpenAI Chat Completions adapter (POST <base_url>/chat/completions).
-- Body is the unified request itself, minus HomeAgent-only fields. Quirks:
--  * extra_body keys are merged into the top level; disable_thinking is dropped;
--  * reasoning_content is removed from history (OpenAI rejects unknown message fields);
--  * reasoning models (o1/o3/o4…, gpt-5 except gpt-5-chat) take max_completion_tokens
--    instead of max_tokens and only the default temperature;
--  * streaming asks for stream_options.include_usage, so usage arrives in a last chunk
--    whose `choices` is empty.
local CFG = {
  name = "openai",
  version = "2.0.0",
  endpoint = "/chat/completions",
  default_model = nil, -- the request's model is used as is
  keep_disable_thinking = false,
  strip_reasoning = true,
  stream_usage = true,
  headers = {["Content-Type"] = "application/json"},
}

local function prepare(req)
  local model = type(req.model) == "string" and req.model or ""
  local reasoning = model:match("^o%d") or (model:match("^gpt%-5") and not model:find("chat", 1, true))
  if reasoning then
    if req.max_completion_tokens == nil then req.max_completion_tokens = req.max_tokens end
    req.max_tokens = nil
    req.temperature = nil
  end
end

-- The OpenAI-compatible request/response/stream mapping is shared: lua/lib/openai_compat.lua.
return require("openai_compat")(CFG, prepare)

-- Anthropic Messages API adapter (POST <base_url>/v1/messages; base_url
-- https://api.anthropic.com). Auth is the x-api-key header (build_headers), not Bearer.
--
-- Request mapping (unified OpenAI-shaped request -> Messages body):
--  * system messages -> top-level `system` (joined with "\n");
--  * user/assistant content -> content blocks (text, image from image_url);
--  * assistant tool_calls -> tool_use blocks {id, name, input};
--  * tool messages -> tool_result blocks in a user message; consecutive messages that
--    end up with the same role are merged into one message (Anthropic wants turns to
--    alternate, and parallel tool results in a single user turn);
--  * tools -> {name, description, input_schema}; tool_choice auto/required/none/{function};
--  * reasoning_content of past assistant turns is not sent (thinking blocks need the
--    signature Anthropic issued, which the unified history does not keep);
--  * temperature is clamped to [0, 1]; extra_body keys are merged into the top level.
local U = require("util")
local null, isnil, str, int, list, is_object, parse_args = U.null, U.isnil, U.str, U.int, U.list, U.is_object, U.parse_args

local DEFAULT_MODEL = "claude-sonnet-4-20250514"
local API_VERSION = "2023-06-01"

local A = {
  name = "anthropic",
  version = "2.0.0",
  endpoint = "/v1/messages",
  stream_format = "sse",
  end_marker = "message_stop", -- a stream without it was cut off
  headers = {["anthropic-version"] = API_VERSION, ["content-type"] = "application/json"},
}

function A.build_headers(meta)
  local key = type(meta) == "table" and str(meta.api_key) or ""
  return {["x-api-key"] = key, ["anthropic-version"] = API_VERSION,
    ["content-type"] = "application/json"}
end

local function image_block(url)
  local mime, data = url:match("^data:([^;,]+);base64,(.*)$")
  if mime then return {type = "image", source = {type = "base64", media_type = mime, data = data}} end
  return {type = "image", source = {type = "url", url = url}}
end

-- unified content (string | list of parts | null) -> list of Anthropic blocks
local function blocks_of(c)
  local out = json.array()
  if type(c) == "string" then
    if c ~= "" then out[1] = {type = "text", text = c} end
    return out
  end
  for _, p in ipairs(list(c)) do
    if type(p) == "table" then
      if p.type == "text" and str(p.text) ~= "" then
        out[#out + 1] = {type = "text", text = p.text}
      elseif p.type == "image_url" then
        local u = type(p.image_url) == "table" and str(p.image_url.url) or str(p.image_url)
        if u ~= "" then out[#out + 1] = image_block(u) end
      end
    end
  end
  return out
end

local function text_of(c)
  if type(c) == "string" then return c end
  local t = {}
  for _, p in ipairs(list(c)) do
    if type(p) == "table" and p.type == "text" then t[#t + 1] = str(p.text) end
  end
  return table.concat(t, "\n")
end

function A.transform_request(raw)
  local req = json.decode(raw)
  if not is_object(req) then error("anthropic: request is not a JSON object") end
  local body = {
    model = (str(req.model) ~= "") and req.model or DEFAULT_MODEL,
    max_tokens = int(req.max_tokens) > 0 and int(req.max_tokens) or 4096,
    stream = req.stream == true,
  }
  if type(req.temperature) == "number" then
    local t = req.temperature
    if t > 1 then t = 1.0 elseif t < 0 then t = 0.0 end
    body.temperature = t
  end

  local system, msgs = {}, json.array()
  local function push(role, blocks)
    if #blocks == 0 then return end
    local last = msgs[#msgs]
    if last and last.role == role then
      for _, b in ipairs(blocks) do last.content[#last.content + 1] = b end
    else
      msgs[#msgs + 1] = {role = role, content = blocks}
    end
  end
  for _, m in ipairs(list(req.messages)) do
    if type(m) == "table" then
      if m.role == "system" then
        local t = text_of(m.content)
        if t ~= "" then system[#system + 1] = t end
      elseif m.role == "user" then
        push("user", blocks_of(m.content))
      elseif m.role == "assistant" then
        local blocks = blocks_of(m.content)
        for _, tc in ipairs(list(m.tool_calls)) do
          local f = type(tc["function"]) == "table" and tc["function"] or {}
          blocks[#blocks + 1] = {type = "tool_use", id = str(tc.id), name = str(f.name),
            input = parse_args(f.arguments)}
        end
        push("assistant", blocks)
      elseif m.role == "tool" then
        local res = {type = "tool_result", tool_use_id = str(m.tool_call_id)}
        if type(m.content) == "string" then
          if m.content ~= "" then res.content = m.content end
        else
          local b = blocks_of(m.content)
          if #b > 0 then res.content = b end
        end
        local blocks = json.array()
        blocks[1] = res
        push("user", blocks)
      end
    end
  end
  -- a message that is a single text block is sent in the short string form
  for _, m in ipairs(msgs) do
    if #m.content == 1 and m.content[1].type == "text" then m.content = m.content[1].text end
  end
  body.messages = msgs
  if #system > 0 then body.system = table.concat(system, "\n") end

  if type(req.tools) == "table" and #req.tools > 0 then
    local tools = json.array()
    for _, t in ipairs(req.tools) do
      local f = type(t) == "table" and type(t["function"]) == "table" and t["function"] or nil
      if f and str(f.name) ~= "" then
        local schema = is_object(f.parameters) and f.parameters or {}
        if schema.type == nil then schema.type = "object" end
        local tool = {name = f.name, input_schema = schema}
        if str(f.description) ~= "" then tool.description = f.description end
        tools[#tools + 1] = tool
      end
    end
    if #tools > 0 then
      body.tools = tools
      local tc = req.tool_choice
      if tc == "auto" then body.tool_choice = {type = "auto"}
      elseif tc == "required" or tc == "any" then body.tool_choice = {type = "any"}
      elseif tc == "none" then body.tool_choice = {type = "none"}
      elseif type(tc) == "table" and type(tc["function"]) == "table"
          and str(tc["function"].name) ~= "" then
        body.tool_choice = {type = "tool", name = tc["function"].name}
      end
    end
  end

  if is_object(req.extra_body) then
    for k, v in pairs(req.extra_body) do body[k] = v end
  end
  -- extended thinking only accepts the default temperature
  if type(body.thinking) == "table" and body.thinking.type == "enabled" then body.temperature = nil end
  return json.encode(body)
end

local STOP = {end_turn = "stop", stop_sequence = "stop", max_tokens = "length",
  tool_use = "tool_calls", refusal = "content_filter", model_context_window_exceeded = "length"}
local function finish_of(r)
  if type(r) ~= "string" then return "" end
  return STOP[r] or r
end

-- prompt_tokens counts cached input too (input_tokens excludes cache reads/writes).
-- A stream's message_delta usually carries output_tokens only: prompt and total are
-- then 0, which the host's usage merge reads as "not carried".
local function usage_of(u)
  if type(u) ~= "table" then return nil end
  local c = int(u.output_tokens)
  if u.input_tokens == nil then
    return {prompt_tokens = 0, completion_tokens = c, total_tokens = 0}
  end
  local p = int(u.input_tokens) + int(u.cache_creation_input_tokens) + int(u.cache_read_input_tokens)
  local cached = int(u.cache_read_input_tokens)
  return {prompt_tokens = p, completion_tokens = c, total_tokens = p + c,
    cached_tokens = cached > 0 and cached or nil}
end

local function error_text(e)
  if type(e) == "table" then
    local t, m = str(e.type), str(e.message)
    if t ~= "" and m ~= "" then return t .. ": " .. m end
    if m ~= "" then return m end
  end
  return json.encode(e)
end

function A.transform_response(raw)
  local d = json.decode(raw)
  if not is_object(d) then error("anthropic: response is not a JSON object") end
  if d.type == "error" or not isnil(d.error) then error("anthropic error: " .. error_text(d.error)) end
  local text, think, calls = {}, {}, json.array()
  for _, b in ipairs(list(d.content)) do
    if type(b) == "table" then
      if b.type == "text" then
        text[#text + 1] = str(b.text)
      elseif b.type == "thinking" then
        think[#think + 1] = str(b.thinking)
      elseif b.type == "tool_use" then
        local input = is_object(b.input) and b.input or {}
        calls[#calls + 1] = {id = str(b.id), type = "function", name = str(b.name),
          arguments = input, raw_arguments = json.encode(input)}
      end
    end
  end
  return json.encode({
    content = table.concat(text),
    reasoning_content = table.concat(think),
    finish_reason = finish_of(d.stop_reason),
    usage = usage_of(d.usage) or usage_of({}),
    tool_calls = calls,
  })
end

-- payload = the JSON after "data:" of one SSE event; the event's `type` field names it
function A.transform_stream_chunk(payload)
  local d = json.decode(payload)
  if not is_object(d) then return "" end
  local out = {content = "", reasoning_content = "", done = false, finish_reason = "",
    tool_calls = json.array()}
  local t = d.type
  if t == "message_start" then
    out.usage = usage_of(type(d.message) == "table" and d.message.usage or nil)
    if not out.usage then return "" end
  elseif t == "content_block_start" then
    local b = type(d.content_block) == "table" and d.content_block or {}
    if b.type == "tool_use" then
      out.tool_calls[1] = {index = int(d.index), id = str(b.id), type = "function",
        name = str(b.name), raw_arguments = ""}
    elseif b.type == "text" and str(b.text) ~= "" then
      out.content = b.text
    elseif b.type == "thinking" and str(b.thinking) ~= "" then
      out.reasoning_content = b.thinking
    else
      return ""
    end
  elseif t == "content_block_delta" then
    local dl = type(d.delta) == "table" and d.delta or {}
    if dl.type == "text_delta" then
      out.content = str(dl.text)
    elseif dl.type == "thinking_delta" then
      out.reasoning_content = str(dl.thinking)
    elseif dl.type == "input_json_delta" then
      out.tool_calls[1] = {index = int(d.index), raw_arguments = str(dl.partial_json)}
    else
      return "" -- signature_delta, citations_delta
    end
  elseif t == "message_delta" then
    out.finish_reason = finish_of(type(d.delta) == "table" and d.delta.stop_reason or nil)
    out.usage = usage_of(d.usage)
    if out.finish_reason == "" and not out.usage then return "" end
  elseif t == "message_stop" then
    out.done = true
  elseif t == "error" then
    log("error", "anthropic stream error: " .. error_text(d.error))
    out.done, out.finish_reason = true, "error"
  else
    return "" -- ping, content_block_stop, unknown events
  end
  return json.encode(out)
end

function A.transform_error(status, body)
  local d = json.decode(str(body))
  local msg = str(body)
  if is_object(d) and not isnil(d.error) then msg = error_text(d.error) end
  msg = msg:gsub("%s+", " ")
  if #msg > 300 then
    msg = msg:sub(1, 300)
    while #msg > 0 and not utf8.len(msg) do msg = msg:sub(1, -2) end
  end
  return "anthropic api error " .. tostring(status) .. ": " .. msg
end

return A

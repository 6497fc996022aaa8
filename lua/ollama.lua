-- Ollama native chat adapter (POST <base_url>/api/chat; base_url http://localhost:11434).
-- Streaming is NDJSON (stream_format = "ndjson"): each payload is one whole JSON line.
--
-- Request mapping:
--  * messages keep their roles; content becomes plain text, images (data: URIs only)
--    go to `images` as bare base64;
--  * assistant tool_calls -> {function = {name, arguments = <object>}};
--  * tool messages -> {role = "tool", content, tool_name};
--  * options {temperature (0.7), num_predict (max_tokens, default 2048)};
--  * `stream` is always sent (Ollama streams when it is missing);
--  * disable_thinking=true -> think = false; tool_choice is not supported and dropped;
--  * extra_body keys are merged into the top level (one level deep for objects, so
--    extra_body.options adds to the generated options).
-- Ollama gives tool-call arguments as an object and no call ids: ids are derived
-- from the call's position, name and arguments so they are stable.
local U = require("util")
local null, isnil, str, int, list, is_object, parse_args = U.null, U.isnil, U.str, U.int, U.list, U.is_object, U.parse_args

local DEFAULT_MODEL = "llama3"

local A = {
  name = "ollama",
  version = "2.0.0",
  endpoint = "/api/chat",
  stream_format = "ndjson",
  headers = {["Content-Type"] = "application/json"},
}

local function merge_into(dst, src)
  for k, v in pairs(src) do
    if is_object(dst[k]) and is_object(v) then
      for k2, v2 in pairs(v) do dst[k][k2] = v2 end
    else
      dst[k] = v
    end
  end
end

-- unified content -> text, list of base64 images
local function flatten(c)
  if type(c) == "string" then return c, nil end
  local text, images = {}, json.array()
  for _, p in ipairs(list(c)) do
    if type(p) == "table" then
      if p.type == "text" then
        text[#text + 1] = str(p.text)
      elseif p.type == "image_url" then
        local u = type(p.image_url) == "table" and str(p.image_url.url) or str(p.image_url)
        local data = u:match("^data:[^;,]*;base64,(.*)$")
        if data then
          images[#images + 1] = data
        elseif u ~= "" then
          log("warn", "ollama: only data: URI images are supported, skipped " .. u:sub(1, 80))
        end
      end
    end
  end
  return table.concat(text, "\n"), (#images > 0) and images or nil
end

function A.transform_request(raw)
  local req = json.decode(raw)
  if not is_object(req) then error("ollama: request is not a JSON object") end
  local msgs, names = json.array(), {}
  for _, m in ipairs(list(req.messages)) do
    if type(m) == "table" and type(m.role) == "string" then
      local text, images = flatten(m.content)
      local out = {role = m.role, content = text, images = images}
      if m.role == "assistant" and type(m.tool_calls) == "table" and #m.tool_calls > 0 then
        local calls = json.array()
        for _, tc in ipairs(m.tool_calls) do
          local f = type(tc["function"]) == "table" and tc["function"] or {}
          names[str(tc.id)] = str(f.name)
          calls[#calls + 1] = {["function"] = {name = str(f.name), arguments = parse_args(f.arguments)}}
        end
        out.tool_calls = calls
      elseif m.role == "tool" then
        local name = str(m.name)
        if name == "" then name = names[str(m.tool_call_id)] or "" end
        if name ~= "" then out.tool_name = name end
      end
      msgs[#msgs + 1] = out
    end
  end
  local body = {
    model = str(req.model) ~= "" and req.model or DEFAULT_MODEL,
    messages = msgs,
    stream = req.stream == true,
    options = {
      temperature = type(req.temperature) == "number" and req.temperature or 0.7,
      num_predict = int(req.max_tokens) > 0 and int(req.max_tokens) or 2048,
    },
  }
  if type(req.tools) == "table" and #req.tools > 0 then body.tools = req.tools end
  if req.disable_thinking == true then body.think = false end
  if is_object(req.extra_body) then merge_into(body, req.extra_body) end
  return json.encode(body)
end

local function call_id(tc, idx, name, rawargs)
  if str(tc.id) ~= "" then return tc.id end
  return "call_" .. idx .. "_" .. sha256_hex(name .. rawargs):sub(1, 12)
end

-- message.tool_calls -> list of {index, id, name, arguments, raw_arguments}
local function calls_of(m)
  local calls = {}
  for i, tc in ipairs(list(m.tool_calls)) do
    if type(tc) == "table" then
      local f = type(tc["function"]) == "table" and tc["function"] or {}
      local args = parse_args(f.arguments)
      local rawargs = type(f.arguments) == "string" and f.arguments or json.encode(args)
      local name = str(f.name)
      calls[#calls + 1] = {id = call_id(tc, i - 1, name, rawargs), vendor_id = str(tc.id), name = name,
        arguments = args, raw_arguments = rawargs}
    end
  end
  return calls
end

local function usage_of(d)
  if d.prompt_eval_count == nil and d.eval_count == nil then return nil end
  local p, c = int(d.prompt_eval_count), int(d.eval_count)
  return {prompt_tokens = p, completion_tokens = c, total_tokens = p + c}
end

function A.transform_response(raw)
  local d = json.decode(raw)
  if not is_object(d) then error("ollama: response is not a JSON object") end
  if not isnil(d.error) then error("ollama error: " .. (type(d.error) == "string" and d.error or json.encode(d.error))) end
  local m = type(d.message) == "table" and d.message or {}
  local tool_calls = json.array()
  for i, c in ipairs(calls_of(m)) do
    tool_calls[i] = {id = c.id, type = "function", name = c.name, arguments = c.arguments,
      raw_arguments = c.raw_arguments}
  end
  local finish = str(d.done_reason)
  if finish == "" and d.done == true then finish = "stop" end
  if #tool_calls > 0 and finish == "stop" then finish = "tool_calls" end
  return json.encode({
    content = str(m.content),
    reasoning_content = str(m.thinking),
    finish_reason = finish,
    usage = usage_of(d) or usage_of({prompt_eval_count = 0}),
    tool_calls = tool_calls,
  })
end

-- The host groups stream fragments by `index`. Ollama sends each tool call whole, maybe
-- one per chunk, without an index, so each call takes the next value of a counter kept
-- in this Lua state (the host runs one state per source and feeds a stream's chunks
-- through it in order): unique within a stream, ascending in arrival order.
local next_index = 0
local function take_index()
  local i = next_index
  next_index = (next_index + 1) % 0x7fffffff
  return i
end

-- payload = one NDJSON line of the /api/chat stream
function A.transform_stream_chunk(payload)
  local d = json.decode(payload)
  if not is_object(d) then return "" end
  local out = {content = "", reasoning_content = "", done = false, finish_reason = "",
    tool_calls = json.array()}
  if not isnil(d.error) then
    log("error", "ollama stream error: " .. (type(d.error) == "string" and d.error or json.encode(d.error)))
    out.done, out.finish_reason = true, "error"
    return json.encode(out)
  end
  local m = type(d.message) == "table" and d.message or {}
  out.content, out.reasoning_content = str(m.content), str(m.thinking)
  for i, c in ipairs(calls_of(m)) do
    local idx = take_index()
    local id = c.vendor_id ~= "" and c.vendor_id or call_id({}, idx, c.name, c.raw_arguments)
    out.tool_calls[i] = {index = idx, id = id, type = "function", name = c.name,
      raw_arguments = c.raw_arguments}
  end
  if d.done == true then
    out.done = true
    out.finish_reason = str(d.done_reason) ~= "" and d.done_reason or "stop"
    out.usage = usage_of(d)
  end
  if out.content == "" and out.reasoning_content == "" and #out.tool_calls == 0 and not out.done then
    return ""
  end
  return json.encode(out)
end

function A.transform_error(status, body)
  local d = json.decode(str(body))
  local msg = str(body)
  if is_object(d) and type(d.error) == "string" then msg = d.error end
  msg = msg:gsub("%s+", " ")
  if #msg > 300 then
    msg = msg:sub(1, 300)
    while #msg > 0 and not utf8.len(msg) do msg = msg:sub(1, -2) end
  end
  return "ollama api error " .. tostring(status) .. ": " .. msg
end

return A

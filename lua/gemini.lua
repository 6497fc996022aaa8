-- Google Gemini generateContent adapter (base_url https://generativelanguage.googleapis.com).
-- The model is part of the URL, so the static `endpoint` is only informative: the host
-- calls build_url(base_url, model, stream). The key goes in x-goog-api-key.
--
-- Request mapping:
--  * system messages -> systemInstruction; user -> role "user"; assistant -> role "model";
--  * text -> {text}; image_url -> inlineData (data: URI) or fileData (other URLs);
--  * assistant tool_calls -> functionCall parts {name, args}; the first one of a turn gets
--    the documented placeholder thoughtSignature (Gemini 3 refuses function-call history
--    without a signature, and the unified history does not keep the real one);
--  * tool messages -> functionResponse parts {name, response} in a user turn (a JSON
--    object result is sent as is, anything else as {result = text}); consecutive turns
--    with the same role are merged, so parallel results share one turn;
--  * tools -> tools[{functionDeclarations}], JSON Schema reduced to Gemini's subset;
--  * generationConfig {temperature (0.7), maxOutputTokens (4096)}; disable_thinking on a
--    2.5 Flash model -> thinkingConfig.thinkingBudget = 0;
--  * extra_body keys are merged into the top level (one level deep for objects, so
--    extra_body.generationConfig adds to the generated one).
local U = require("util")
local null, isnil, str, int, list, is_object, parse_args = U.null, U.isnil, U.str, U.int, U.list, U.is_object, U.parse_args

local DEFAULT_MODEL = "gemini-2.5-flash"
local SKIP_SIGNATURE = "skip_thought_signature_validator"

local A = {
  name = "gemini",
  version = "2.0.0",
  endpoint = "/v1beta/models",
  stream_format = "sse",
  end_marker = "finishReason", -- no [DONE]: the last chunk carries the finish reason
  headers = {["Content-Type"] = "application/json"},
}

function A.build_url(base_url, model, stream)
  local base = (str(base_url):gsub("/+$", ""))
  local m = str(model)
  if m == "" or m == "AUTO" then m = DEFAULT_MODEL end
  m = (m:gsub("^models/", ""))
  if not (base:match("/v1beta$") or base:match("/v1$") or base:match("/v1alpha$")) then
    base = base .. "/v1beta"
  end
  if stream then return base .. "/models/" .. m .. ":streamGenerateContent?alt=sse" end
  return base .. "/models/" .. m .. ":generateContent"
end

function A.build_headers(meta)
  local key = type(meta) == "table" and str(meta.api_key) or ""
  return {["x-goog-api-key"] = key, ["Content-Type"] = "application/json"}
end

local MIME_BY_EXT = {png = "image/png", jpg = "image/jpeg", jpeg = "image/jpeg",
  gif = "image/gif", webp = "image/webp", heic = "image/heic", pdf = "application/pdf"}

local function media_part(url)
  local mime, data = url:match("^data:([^;,]+);base64,(.*)$")
  if mime then return {inlineData = {mimeType = mime, data = data}} end
  local ext = (url:match("%.(%w+)$") or url:match("%.(%w+)[?#]") or ""):lower()
  return {fileData = {mimeType = MIME_BY_EXT[ext] or "image/jpeg", fileUri = url}}
end

local function parts_of(c)
  local out = json.array()
  if type(c) == "string" then
    if c ~= "" then out[1] = {text = c} end
    return out
  end
  for _, p in ipairs(list(c)) do
    if type(p) == "table" then
      if p.type == "text" and str(p.text) ~= "" then
        out[#out + 1] = {text = p.text}
      elseif p.type == "image_url" then
        local u = type(p.image_url) == "table" and str(p.image_url.url) or str(p.image_url)
        if u ~= "" then out[#out + 1] = media_part(u) end
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

-- Gemini accepts an OpenAPI subset of JSON Schema; unknown keys are a 400.
local SCHEMA_KEYS = {}
for k in ("type format title description nullable enum items properties required "
    .. "anyOf minItems maxItems minProperties maxProperties minLength maxLength pattern "
    .. "minimum maximum default example propertyOrdering"):gmatch("%S+") do
  SCHEMA_KEYS[k] = true
end
local function clean_schema(s)
  if type(s) ~= "table" then return s end
  local o = {}
  for k, v in pairs(s) do
    if SCHEMA_KEYS[k] then
      if k == "properties" and is_object(v) then
        local props = {}
        for pk, pv in pairs(v) do props[pk] = clean_schema(pv) end
        if next(props) ~= nil then o.properties = props end
      elseif k == "items" then
        o.items = clean_schema(v)
      elseif k == "anyOf" and type(v) == "table" then
        local a = json.array()
        for _, x in ipairs(v) do a[#a + 1] = clean_schema(x) end
        o.anyOf = a
      elseif k == "type" and type(v) == "table" then -- ["string", "null"]
        for _, t in ipairs(v) do
          if t == "null" then o.nullable = true elseif o.type == nil then o.type = t end
        end
      else
        o[k] = v
      end
    end
  end
  return o
end

local function merge_into(dst, src)
  for k, v in pairs(src) do
    if is_object(dst[k]) and is_object(v) then
      for k2, v2 in pairs(v) do dst[k][k2] = v2 end
    else
      dst[k] = v
    end
  end
end

function A.transform_request(raw)
  local req = json.decode(raw)
  if not is_object(req) then error("gemini: request is not a JSON object") end
  local contents, system, names = json.array(), {}, {}
  local function push(role, parts)
    if #parts == 0 then return end
    local last = contents[#contents]
    if last and last.role == role then
      for _, p in ipairs(parts) do last.parts[#last.parts + 1] = p end
    else
      contents[#contents + 1] = {role = role, parts = parts}
    end
  end
  for _, m in ipairs(list(req.messages)) do
    if type(m) == "table" then
      if m.role == "system" then
        local t = text_of(m.content)
        if t ~= "" then system[#system + 1] = t end
      elseif m.role == "user" then
        push("user", parts_of(m.content))
      elseif m.role == "assistant" then
        local parts = parts_of(m.content)
        for i, tc in ipairs(list(m.tool_calls)) do
          local f = type(tc["function"]) == "table" and tc["function"] or {}
          names[str(tc.id)] = str(f.name)
          local part = {functionCall = {name = str(f.name), args = parse_args(f.arguments)}}
          if i == 1 then part.thoughtSignature = SKIP_SIGNATURE end
          parts[#parts + 1] = part
        end
        push("model", parts)
      elseif m.role == "tool" then
        local name = str(m.name)
        if name == "" then name = names[str(m.tool_call_id)] or "" end
        local text = text_of(m.content)
        local v = json.decode(text)
        local response = is_object(v) and v or {result = text}
        local parts = json.array()
        parts[1] = {functionResponse = {name = name, response = response}}
        push("user", parts)
      end
    end
  end

  local body = {contents = contents}
  if #system > 0 then body.systemInstruction = {parts = {{text = table.concat(system, "\n")}}} end
  local gen = {
    temperature = type(req.temperature) == "number" and req.temperature or 0.7,
    maxOutputTokens = int(req.max_tokens) > 0 and int(req.max_tokens) or 4096,
  }
  if req.disable_thinking == true and str(req.model):find("2%.5%-flash") then
    gen.thinkingConfig = {thinkingBudget = 0}
  end
  body.generationConfig = gen

  if type(req.tools) == "table" and #req.tools > 0 then
    local decls = json.array()
    for _, t in ipairs(req.tools) do
      local f = type(t) == "table" and type(t["function"]) == "table" and t["function"] or nil
      if f and str(f.name) ~= "" then
        local decl = {name = f.name}
        if str(f.description) ~= "" then decl.description = f.description end
        local schema = clean_schema(f.parameters)
        -- an OBJECT schema without properties is rejected: declare no parameters instead
        if is_object(schema) and (schema.properties ~= nil or (schema.type ~= nil and schema.type ~= "object")) then
          decl.parameters = schema
        end
        decls[#decls + 1] = decl
      end
    end
    if #decls > 0 then
      body.tools = {{functionDeclarations = decls}}
      local tc = req.tool_choice
      local mode
      if tc == "auto" then mode = {mode = "AUTO"}
      elseif tc == "none" then mode = {mode = "NONE"}
      elseif tc == "required" or tc == "any" then mode = {mode = "ANY"}
      elseif type(tc) == "table" and type(tc["function"]) == "table"
          and str(tc["function"].name) ~= "" then
        mode = {mode = "ANY", allowedFunctionNames = {tc["function"].name}}
      end
      if mode then body.toolConfig = {functionCallingConfig = mode} end
    end
  end

  if is_object(req.extra_body) then merge_into(body, req.extra_body) end
  return json.encode(body)
end

local FINISH = {STOP = "stop", MAX_TOKENS = "length", SAFETY = "content_filter",
  RECITATION = "content_filter", BLOCKLIST = "content_filter",
  PROHIBITED_CONTENT = "content_filter", SPII = "content_filter",
  IMAGE_SAFETY = "content_filter", FINISH_REASON_UNSPECIFIED = ""}
local function finish_of(r)
  if type(r) ~= "string" then return "" end
  local f = FINISH[r]
  if f == nil then f = r:lower() end
  return f
end

-- thinking tokens are output tokens: completion = candidates + thoughts
local function usage_of(u)
  if type(u) ~= "table" then return nil end
  local p = int(u.promptTokenCount)
  local c = int(u.candidatesTokenCount) + int(u.thoughtsTokenCount)
  local t = int(u.totalTokenCount)
  return {prompt_tokens = p, completion_tokens = c, total_tokens = t > 0 and t or p + c}
end

local function call_id(fc, idx, name, rawargs)
  if str(fc.id) ~= "" then return fc.id end
  return "call_" .. idx .. "_" .. sha256_hex(name .. rawargs):sub(1, 12)
end

-- one GenerateContentResponse -> content, reasoning, calls, finish_reason, usage
local function parse(d)
  local text, think, calls = {}, {}, {}
  local finish = ""
  local cand = list(d.candidates)[1]
  if type(cand) == "table" then
    local content = type(cand.content) == "table" and cand.content or {}
    for _, p in ipairs(list(content.parts)) do
      if type(p) == "table" then
        if type(p.text) == "string" then
          if p.thought == true then think[#think + 1] = p.text else text[#text + 1] = p.text end
        elseif type(p.functionCall) == "table" then
          local fc = p.functionCall
          local args = is_object(fc.args) and fc.args or {}
          local rawargs = json.encode(args)
          local name = str(fc.name)
          calls[#calls + 1] = {id = call_id(fc, #calls, name, rawargs), vendor_id = str(fc.id), name = name,
            arguments = args, raw_arguments = rawargs}
        end
      end
    end
    finish = finish_of(cand.finishReason)
    if finish == "stop" and #calls > 0 then finish = "tool_calls" end
  elseif type(d.promptFeedback) == "table" and str(d.promptFeedback.blockReason) ~= "" then
    finish = "content_filter"
  end
  return table.concat(text), table.concat(think), calls, finish, usage_of(d.usageMetadata)
end

local function error_text(e)
  if type(e) == "table" then
    local s, m = str(e.status), str(e.message)
    if s ~= "" and m ~= "" then return s .. ": " .. m end
    if m ~= "" then return m end
  end
  return json.encode(e)
end

function A.transform_response(raw)
  local d = json.decode(raw)
  if not is_object(d) then error("gemini: response is not a JSON object") end
  if not isnil(d.error) then error("gemini error: " .. error_text(d.error)) end
  local content, reasoning, calls, finish, usage = parse(d)
  local tool_calls = json.array()
  for i, c in ipairs(calls) do
    tool_calls[i] = {id = c.id, type = "function", name = c.name, arguments = c.arguments,
      raw_arguments = c.raw_arguments}
  end
  return json.encode({content = content, reasoning_content = reasoning, finish_reason = finish,
    usage = usage or usage_of({}), tool_calls = tool_calls})
end

-- The host groups stream fragments by `index`. Gemini sends each tool call whole, maybe
-- one per chunk, without an index, so each call takes the next value of a counter kept
-- in this Lua state (the host runs one state per source and feeds a stream's chunks
-- through it in order): unique within a stream, ascending in arrival order.
local next_index = 0
local function take_index()
  local i = next_index
  next_index = (next_index + 1) % 0x7fffffff
  return i
end

function A.transform_stream_chunk(payload)
  local d = json.decode(payload)
  if not is_object(d) then return "" end
  local out = {content = "", reasoning_content = "", done = false, finish_reason = "",
    tool_calls = json.array()}
  if not isnil(d.error) then
    log("error", "gemini stream error: " .. error_text(d.error))
    out.done, out.finish_reason = true, "error"
    return json.encode(out)
  end
  local content, reasoning, calls, finish, usage = parse(d)
  out.content, out.reasoning_content, out.usage = content, reasoning, usage
  for i, c in ipairs(calls) do
    local idx = take_index()
    local id = c.vendor_id ~= "" and c.vendor_id or call_id({}, idx, c.name, c.raw_arguments)
    out.tool_calls[i] = {index = idx, id = id, type = "function", name = c.name,
      raw_arguments = c.raw_arguments}
  end
  if finish ~= "" then out.finish_reason, out.done = finish, true end
  if content == "" and reasoning == "" and #calls == 0 and not out.done and not usage then
    return ""
  end
  return json.encode(out)
end

function A.transform_error(status, body)
  local d = json.decode(str(body))
  local msg = str(body)
  if is_object(d) and not isnil(d.error) then msg = error_text(d.error) end
  if type(d) == "table" and type(d[1]) == "table" and not isnil(d[1].error) then
    msg = error_text(d[1].error) -- streaming errors come as a one-element array
  end
  msg = msg:gsub("%s+", " ")
  if #msg > 300 then
    msg = msg:sub(1, 300)
    while #msg > 0 and not utf8.len(msg) do msg = msg:sub(1, -2) end
  end
  return "gemini api error " .. tostring(status) .. ": " .. msg
end

return A

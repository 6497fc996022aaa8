-- Shared mapping of the OpenAI-compatible adapters (openai, deepseek, github, groq,
-- kimicode, mistral, server). Each adapter defines its quirks in a CFG table and an
-- optional prepare(req) hook, then returns require("openai_compat")(CFG, prepare).
return function(CFG, prepare)
  local U = require("util")
  local null, isnil, str, int, list, is_object = U.null, U.isnil, U.str, U.int, U.list, U.is_object
  local function args_string(v)
    if type(v) == "table" then return json.encode(v) end -- some servers send an object
    return str(v)
  end
  local function parse_args(raw)
    local v = json.decode(raw ~= "" and raw or "{}")
    if is_object(v) then return v end
    return {}
  end
  local function usage_of(u)
    if type(u) ~= "table" then return nil end
    local p, c, t = int(u.prompt_tokens), int(u.completion_tokens), int(u.total_tokens)
    -- OpenAI: prompt_tokens_details.cached_tokens; DeepSeek: prompt_cache_hit_tokens
    local d = type(u.prompt_tokens_details) == "table" and u.prompt_tokens_details or {}
    local cached = int(d.cached_tokens) + int(u.prompt_cache_hit_tokens)
    return {prompt_tokens = p, completion_tokens = c, total_tokens = t > 0 and t or p + c,
      cached_tokens = cached > 0 and cached or nil}
  end
  -- content is a string, or (Mistral reasoning models, some gateways) a list of parts
  local function split_content(c)
    if type(c) == "string" then return c, "" end
    local text, think = {}, {}
    for _, p in ipairs(list(c)) do
      if type(p) == "table" and p.type == "text" then
        text[#text + 1] = str(p.text)
      elseif type(p) == "table" and p.type == "thinking" then
        think[#think + 1] = str(p.thinking)
        for _, q in ipairs(list(p.thinking)) do
          if type(q) == "table" then think[#think + 1] = str(q.text) end
        end
      end
    end
    return table.concat(text), table.concat(think)
  end
  -- DeepSeek/Kimi say reasoning_content, Groq/vLLM/OpenRouter say reasoning
  local function reasoning_of(m, prefix)
    local r = m.reasoning_content
    if type(r) ~= "string" then r = m.reasoning end
    return prefix .. str(r)
  end
  local function error_text(e)
    if type(e) == "table" and str(e.message) ~= "" then return e.message end
    if type(e) == "string" then return e end
    return json.encode(e)
  end

  local A = {
    name = CFG.name,
    version = CFG.version,
    endpoint = CFG.endpoint,
    stream_format = "sse",
    headers = CFG.headers,
  }

  function A.transform_request(raw)
    local req = json.decode(raw)
    if not is_object(req) then error(CFG.name .. ": request is not a JSON object") end
    if is_object(req.extra_body) then
      for k, v in pairs(req.extra_body) do req[k] = v end
    end
    req.extra_body = nil
    if str(req.model) == "" then req.model = CFG.default_model end
    prepare(req)
    if not CFG.keep_disable_thinking then req.disable_thinking = nil end
    for k, v in pairs(req) do
      if v == null then req[k] = nil end
    end
    if type(req.tools) ~= "table" or #req.tools == 0 then
      req.tools, req.tool_choice = nil, nil
    end
    for _, t in ipairs(list(req.tools)) do
      if type(t) == "table" and type(t["function"]) == "table" and t["function"].parameters == null then
        t["function"].parameters = nil
      end
    end
    for _, m in ipairs(list(req.messages)) do
      if type(m) == "table" then
        if CFG.strip_reasoning then m.reasoning_content = nil end
        if type(m.tool_calls) == "table" and #m.tool_calls == 0 then m.tool_calls = nil end
      end
    end
    if req.stream == true and CFG.stream_usage and req.stream_options == nil then
      req.stream_options = {include_usage = true}
    end
    return json.encode(req)
  end

  function A.transform_response(raw)
    local d = json.decode(raw)
    if not is_object(d) then error(CFG.name .. ": response is not a JSON object") end
    if not isnil(d.error) then error(CFG.name .. " error: " .. error_text(d.error)) end
    local ch = list(d.choices)[1]
    if type(ch) ~= "table" then error(CFG.name .. ": response has no choices") end
    local m = type(ch.message) == "table" and ch.message or {}
    local content, reasoning = split_content(m.content)
    local calls = json.array()
    for _, tc in ipairs(list(m.tool_calls)) do
      local f = type(tc["function"]) == "table" and tc["function"] or {}
      local rawargs = args_string(f.arguments)
      calls[#calls + 1] = {id = str(tc.id), type = "function", name = str(f.name),
        arguments = parse_args(rawargs), raw_arguments = rawargs}
    end
    return json.encode({
      content = content,
      reasoning_content = reasoning_of(m, reasoning),
      finish_reason = str(ch.finish_reason),
      usage = usage_of(d.usage) or usage_of(ch.usage) or usage_of({}),
      tool_calls = calls,
    })
  end

  function A.transform_stream_chunk(payload)
    local d = json.decode(payload)
    if not is_object(d) then return "" end
    local out = {content = "", reasoning_content = "", done = false, finish_reason = "",
      tool_calls = json.array()}
    if not isnil(d.error) then
      log("error", CFG.name .. " stream error: " .. error_text(d.error))
      out.done, out.finish_reason = true, "error"
      return json.encode(out)
    end
    local ch = list(d.choices)[1]
    local xg = type(d.x_groq) == "table" and d.x_groq or {}
    -- usage: top level (OpenAI include_usage, Mistral, DeepSeek), inside the choice
    -- (Moonshot/Kimi), or x_groq.usage (Groq)
    out.usage = usage_of(d.usage) or (type(ch) == "table" and usage_of(ch.usage)) or usage_of(xg.usage)
    if type(ch) == "table" then
      local delta = type(ch.delta) == "table" and ch.delta or {}
      local c, r = split_content(delta.content)
      out.content, out.reasoning_content = c, reasoning_of(delta, r)
      for i, tc in ipairs(list(delta.tool_calls)) do
        local f = type(tc["function"]) == "table" and tc["function"] or {}
        local frag = {index = type(tc.index) == "number" and int(tc.index) or i - 1,
          raw_arguments = args_string(f.arguments)}
        if str(tc.id) ~= "" then frag.id = tc.id end
        if str(tc.type) ~= "" then frag.type = tc.type end
        if str(f.name) ~= "" then frag.name = f.name end
        out.tool_calls[#out.tool_calls + 1] = frag
      end
      if str(ch.finish_reason) ~= "" then out.finish_reason, out.done = ch.finish_reason, true end
    end
    if out.content == "" and out.reasoning_content == "" and #out.tool_calls == 0
        and not out.done and not out.usage then
      return ""
    end
    return json.encode(out)
  end

  function A.transform_error(status, body)
    local d = json.decode(str(body))
    local msg = str(body)
    if is_object(d) and not isnil(d.error) then msg = error_text(d.error)
    elseif is_object(d) and str(d.message) ~= "" then msg = d.message end
    msg = msg:gsub("%s+", " ")
    if #msg > 300 then
      msg = msg:sub(1, 300)
      while #msg > 0 and not utf8.len(msg) do msg = msg:sub(1, -2) end
    end
    return CFG.name .. " api error " .. tostring(status) .. ": " .. msg
  end
  return A
end

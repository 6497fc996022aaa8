-- A Lua test plugin exercising the sdk API on a real kernel.
local M = {}
local seen_events = 0
local outbox = {}

sdk.register_tool("lp_data", {description = "Run the data API scenario"}, function(args)
  local out = {}
  local c, err = sdk.memory.commit({
    {subject = "Carol", subject_type = "person", relation = "trait:pet", object = "cat", object_type = "trait_value"},
    {subject = "Carol", subject_type = "person", relation = "sister", object = "Dana", object_type = "person"},
  })
  out.commit = c and c.relations or err
  local r = sdk.memory.recall({"Carol"}, 1)
  out.recall = #r.entities
  out.introspect = sdk.memory.introspect().entity_count
  out.trait = sdk.social.get_trait("Carol", "pet").value
  out.persons = sdk.social.list_persons()
  out.relations = #sdk.social.get_relations("Carol")
  out.set_trait = sdk.social.set_trait("Dana", "city", "Oslo").relations
  out.dana_city = sdk.social.get_trait("Dana", "city").value
  local id = sdk.doc.insert{title = "garden", content = "tomatoes planted on the south bed"}
  local docs = sdk.doc.query("tomatoes south bed", 3)
  out.doc = docs[1].id == id
  out.stats = sdk.doc.stats().documents
  out.removed = sdk.doc.remove(id)
  out.kadd = sdk.knowledge.add("recipes/soup", "Lentil soup: lentils, carrots, cumin.")
  out.kfound = sdk.knowledge.search("lentil soup", 3)[1].name
  out.klist = #sdk.knowledge.list()
  local none, terr = sdk.text_memory.append{role = "assistant", content = "lua line", channel = "lab"}
  out.text_denied = terr
  local ok, ierr = pcall(sdk.inject_text, "hi")
  out.inject_denied = tostring(ierr)
  local _, bad = sdk.memory.commit("nope")
  out.bad = bad
  return out
end)

-- Settings: own keys freely, nothing else without settings_cross; named APIs.
local api_errors = {}
api_errors.no_handler = select(2, sdk.register_api("lonely"))
api_errors.bad_name = select(2, sdk.register_api("no/slash", function() end))
local api_route = sdk.register_api("greet", function(body)
  local greeting = sdk.get_setting("greeting")
  return {greeting = greeting, to = body and body.name or "nobody"}
end)
sdk.register_api("refuse", function(body)
  return nil, "refused: " .. tostring(body and body.why)
end)

sdk.register_tool("lp_settings", {description = "Run the settings scenario"}, function(args)
  local out = {api_route = api_route, api_errors = api_errors}
  out.greeting = sdk.get_setting("greeting")
  out.set = sdk.set_setting("greeting", args.greeting or "hi there")
  out.greeting2 = sdk.get_setting("plugin.luaprobe.greeting")
  out.token_set = sdk.set_setting("token", "tok-123")
  out.token_own = sdk.get_setting("token")
  out.unset = sdk.get_setting("never.set") == nil
  out.list = sdk.settings.list()
  out.defs = sdk.settings.defs()
  out.own_via_plugin = sdk.settings.get_plugin("luaprobe", "greeting")
  out.own_list = sdk.settings.list_plugin("luaprobe")
  out.cross_write = select(2, sdk.settings.set_plugin("luaadmin", "note", "from probe"))
  out.cross_read = select(2, sdk.settings.get_plugin("luaadmin", "note"))
  out.core_read = select(2, sdk.settings.get_core("core.llm.max_tokens"))
  out.own_only = select(2, sdk.set_setting("plugin.luaadmin.note", "x"))
  out.dump = select(2, sdk.settings.dump())
  out.llm = select(2, sdk.llm.list_sources())
  out.bad_key = select(2, sdk.set_setting("Bad Key!", 1))
  return out
end)

sdk.register_tool("lp_state", {description = "Events seen and channel deliveries"}, function()
  return {events = seen_events, outbox = outbox}
end)

sdk.register_output_channel("lp_out", {"text"}, "the Lua probe's channel", {}, function(msg)
  outbox[#outbox + 1] = msg.payload
  return "lua got " .. msg.payload
end)

sdk.register_stage("before_output", function(ctx)
  if string.find(ctx.final_text, "lua-stage", 1, true) then
    ctx.final_text = ctx.final_text .. " [lua]"
  end
end)

function M.start(s)
  local ok, err = s.events.subscribe({"agent_output"}, function(ev)
    seen_events = seen_events + 1
  end)
  assert(ok, err)
  local r, derr = s.settings.register_def{key = "greeting", default = "hello", description = "What the Lua probe says first"}
  assert(r, derr)
  r, derr = s.settings.register_def("token", "", "The probe's bridge token", true)
  assert(r, derr)
  s.log("info", "luaprobe started")
end

return M

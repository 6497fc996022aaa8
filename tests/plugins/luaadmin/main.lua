-- A Lua test plugin allowed outside its own settings (settings_cross) and to see the LLM sources.

sdk.register_tool("la_settings", {description = "Read and write core and other plugins' settings"}, function()
  local out = {}
  out.model = sdk.settings.get_core("core.agent.system_prompt")
  out.api_key = sdk.settings.get_core("core.llm.api_key")
  out.source_key = sdk.settings.get_core("core.llm.sources.fake.api_key")
  out.llm_list = sdk.settings.list_core("core.llm.")
  out.probe_token = sdk.settings.get_plugin("luaprobe", "token")
  out.probe_list = sdk.settings.list_plugin("luaprobe")
  out.dump = sdk.settings.dump()
  out.plugins = sdk.settings.plugins()
  out.set_core = sdk.settings.set_core("core.agent.max_tool_turns", 7)
  out.bad_core = select(2, sdk.settings.set_core("core.agent.max_tool_turns", "lots"))
  out.typo = select(2, sdk.settings.get_core("core.llm.max_tokns"))
  out.set_probe = sdk.settings.set_plugin("luaprobe", "greeting", "set by admin")
  out.own = sdk.set_setting("note", "admin note")
  -- Owner-only: pointing a source at itself would send it the owner's LLM key.
  out.retarget = select(2, sdk.settings.set_core("core.llm.sources.fake.base_url", "http://127.0.0.1:9/v1"))
  out.unreview = select(2, sdk.settings.set_core("core.security.review", false))
  return out
end)

sdk.register_tool("la_llm", {description = "List, show and pick LLM sources"}, function(args)
  local out = {}
  if args.prefer then
    local r, err = sdk.llm.set_source(args.prefer)
    out.set = r or err
  end
  out.sources = sdk.llm.list_sources()
  out.current = sdk.llm.current_source()
  return out
end)

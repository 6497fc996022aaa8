//! The Chinese of the descriptions a person reads on the settings and plugins pages:
//! every core setting, every field of an LLM source, the settings the bundled plugins
//! declare and every tool the kernel or a bundled plugin registers.
//!
//! The English stays where it is defined (`core_defs` and `SOURCE_FIELDS` in the
//! actors' `config::defs`, each tool's spec, a plugin's `settings.registerDef`):
//! that is also the text the model reads, whatever the language, and moving it here
//! would take it away from the code it describes. Only the Chinese lives here, keyed
//! by the setting's full key (`core.agent.max_tool_turns`, `plugin.onebot.url`), the
//! source field's name (`base_url`) or the tool's name (`files_read`).
//!
//! Tables rather than `match`: the tests walk them both ways — every definition and
//! every registered tool has an entry (tests in the actors' `config::defs` and in
//! `tests/webui.rs`, over the real lists), and every entry still names one (a renamed
//! setting or tool cannot leave a stale line behind). A lookup is a linear scan of
//! about a hundred entries, done once per entry a page asks for; not worth an index.
//!
//! Each Chinese text says what the English says, as briefly, in words an operator
//! uses; setting names, tool names, numbers and units are kept as written
//! ([`check_zh`] holds every entry to that against its English).

/// `(full key, Chinese)` of every core setting and every bundled plugin's declared
/// setting (`plugin.<plugin>.<key>`).
pub const SETTINGS_ZH: &[(&str, &str)] = &[
    // Daemon.
    ("core.daemon.data_dir", "存放守护进程数据库、插件和日志的目录"),
    ("core.daemon.log_level", "记录日志的最低级别"),
    (
        "core.telemetry.otlp_endpoint",
        "OpenTelemetry 采集器的 OTLP/HTTP 地址（如 http://127.0.0.1:4318）：每轮对话的追踪（回忆、模型调用、工具调用）发往此处；留空 = 关闭。仅支持明文 http：远程或 TLS 采集器请经本机的 OpenTelemetry Collector 转发",
    ),
    (
        "core.daemon.shutdown_timeout",
        "正常关闭最多可用的时间，超时后其余组件被强制停止",
    ),
    (
        "core.backup.interval",
        "自动备份整个数据目录的间隔（备份存放在 core.backup.dir）",
    ),
    (
        "core.backup.keep",
        "保留多少份自动备份（最旧的会被删除）；0 = 不做自动备份",
    ),
    (
        "core.backup.dir",
        "备份写到哪里；为空 = DATA/backups。放在另一块磁盘上可以防止这块磁盘损坏时一起丢失",
    ),
    (
        "core.daemon.heartbeat_interval",
        "为外部看门狗重写 DATA/heartbeat（t=<unix 秒>）的间隔",
    ),
    (
        "core.daemon.allowed_hosts",
        "除回环名称和监听地址外，HTTP API 还接受的主机名（逗号分隔，不带端口），如反向代理的域名",
    ),
    (
        "webui.listen_addr",
        "HTTP API 与 WebUI 的监听地址，每次启动时从 --listen（或 HOMED_LISTEN）记录；要换地址，请用另一个 --listen 重启（在此写入的值会在下次启动时被替换）",
    ),
    // LLM.
    (
        "core.llm.provider",
        "同一优先级的 LLM 来源中最先使用的那个（留空：按优先级，再按名称）",
    ),
    (
        "core.llm.background_source",
        "后台工作（心跳任务的模型调用和常驻子代理的每一轮）专用的 LLM 来源，如便宜或本地的模型；它从不回退到其他来源。留空：按通常的顺序",
    ),
    (
        "core.llm.budget.daily_tokens",
        "所有模型调用每个 UTC 日合计最多可用的 token 数（提示与回答），每次调用前检查；0 = 不限",
    ),
    (
        "core.llm.budget.daily_usd",
        "所有模型调用每个 UTC 日最多可花的美元，按 core.llm.prices 计价；最坏情况已放不下的来源被跳过，改用下一个（更便宜的）。0 = 不限",
    ),
    (
        "core.llm.budget.monthly_usd",
        "所有模型调用每个 UTC 自然月最多可花的美元，规则同 core.llm.budget.daily_usd；0 = 不限",
    ),
    (
        "core.llm.budget.monthly_tokens",
        "所有模型调用每个 UTC 自然月合计最多可用的 token 数（提示与回答），每次调用前检查；0 = 不限",
    ),
    (
        "core.llm.budget.guest_daily_tokens",
        "每位访客（聊天桥接上不是主人的人）每个 UTC 日最多可用的 token 数，算在每日总限额之内；0 = 不单独限制",
    ),
    (
        "core.llm.budget.guest_monthly_tokens",
        "每位访客（聊天桥接上不是主人的人）每个 UTC 自然月最多可用的 token 数，算在每月总限额之内；0 = 不单独限制",
    ),
    (
        "core.llm.budget.guest_daily_usd",
        "每位访客（聊天桥接上不是主人的人）每个 UTC 日最多可花的美元，按 core.llm.prices 计价；0 = 不单独限制",
    ),
    (
        "core.llm.budget.guest_monthly_usd",
        "每位访客（聊天桥接上不是主人的人）每个 UTC 自然月最多可花的美元，按 core.llm.prices 计价；0 = 不单独限制",
    ),
    (
        "core.llm.budget.background_daily_tokens",
        "后台工作（心跳任务的模型调用和常驻子代理的每一轮）每个 UTC 日最多可用的 token 数，算在每日总限额之内；0 = 不单独限制",
    ),
    (
        "core.llm.budget.background_monthly_tokens",
        "后台工作（心跳任务的模型调用和常驻子代理的每一轮）每个 UTC 自然月最多可用的 token 数，算在每月总限额之内；0 = 不单独限制",
    ),
    (
        "core.llm.budget.background_daily_usd",
        "后台工作（心跳任务的模型调用和常驻子代理的每一轮）每个 UTC 日最多可花的美元，按 core.llm.prices 计价；0 = 不单独限制",
    ),
    (
        "core.llm.budget.background_monthly_usd",
        "后台工作（心跳任务的模型调用和常驻子代理的每一轮）每个 UTC 自然月最多可花的美元，按 core.llm.prices 计价；0 = 不单独限制",
    ),
    (
        "core.llm.prices",
        r#"各模型的价格，单位为美元/百万 token，供用量账本计费：{"<模型名或通配>": {"input": 0.15, "output": 0.6, "cached": 0.075}}；没有价格的模型照样计 token，费用显示为未知"#,
    ),
    ("core.llm.api_key", "没有自己密钥的来源所用的 API 密钥"),
    ("core.llm.temperature", "采样温度：越低越确定"),
    ("core.llm.max_tokens", "单条回复最多的 token 数"),
    ("core.llm.thinking_enabled", "模型支持时，要求它输出推理过程"),
    // Locations.
    ("core.plugin.dir", "扫描已安装插件的目录"),
    ("core.memory.graph", "图记忆的数据库文件"),
    ("core.memory.text", "文本（对话）记忆的目录"),
    ("core.memory.documents", "文档记忆的目录"),
    ("core.knowledge.path", "知识库的目录"),
    ("core.log.path", "日志文件的写入目录"),
    // Embeddings.
    (
        "core.memory.embedder",
        "记忆检索用的稠密向量：`auto`（装了 ONNX 就用它，否则用 TF-IDF/BM25）、`onnx`、`remote`（OpenAI 风格的 /v1/embeddings 服务）或 `tfidf`（不用向量）",
    ),
    (
        "core.memory.onnx_dir",
        "scripts/install-embedder.sh 填充的目录（ONNX Runtime + MiniLM）；留空则查找 HOMEAGENT_EMBEDDER_DIR、DATA/models/embedder 和源码目录下的 .deps/embedder",
    ),
    ("core.memory.onnx_threads", "ONNX Runtime 计算向量可用的线程数"),
    (
        "core.memory.embed_url",
        "远程向量服务的基础 URL（OpenAI /v1/embeddings 格式），用于 `core.memory.embedder = remote`",
    ),
    ("core.memory.embed_model", "发给远程向量服务的模型名"),
    (
        "core.memory.embed_api_key",
        "远程向量服务的 API 密钥（作为 Bearer 令牌发送）",
    ),
    // Inputs and imports.
    (
        "core.input_processing.text.max_bytes",
        "单条消息（及导入的一行）可接受的最大文本，按 UTF-8 字节计；更大的以 413 拒绝并指明此限制，什么也不存",
    ),
    (
        "core.memory.import.earliest",
        "历史导入接受的最早对话时间，单位 unix 秒（默认 1970-01-02：时间为 0 或公元 1 年的对话是损坏的导出，不是记忆）",
    ),
    (
        "core.memory.import.max_future",
        "历史导入最多接受晚于现在多久的对话（容许机器间的时钟偏差）；更晚的会排到之后实时说的话后面",
    ),
    (
        "core.input_processing.image.max_bytes",
        "消息中可接受的最大图片，按解码后的字节计；更大的以 400 拒绝，什么也不存",
    ),
    ("core.input_processing.image.max_count", "单条消息最多可带的图片数"),
    (
        "core.input_processing.image.fallback_provider",
        "对标记为 `vision = false` 的来源：先由哪个能看图的来源描述它的图片；留空则任取一个 `vision = true` 的来源，`none` 表示从不描述（模型会被告知来了一张它看不到的图片）",
    ),
    // The media memory.
    (
        "core.memory.multimodal_space.provider",
        r#"回忆媒体块所用的多模态空间（文本与图片在同一空间）：`none`，或 `remote`（接受 {"image": base64} 输入的 Jina 风格 /v1/embeddings 服务）"#,
    ),
    (
        "core.memory.multimodal_space.base_url",
        "多模态向量服务的基础 URL，用于 `core.memory.multimodal_space.provider = remote`",
    ),
    (
        "core.memory.multimodal_space.model",
        "发给多模态向量服务的模型名（属于该空间的指纹：一改，所有媒体块都重新计算向量）",
    ),
    (
        "core.memory.multimodal_space.api_key",
        "多模态向量服务的 API 密钥（作为 Bearer 令牌发送）",
    ),
    (
        "core.memory.media.recall_k",
        "每轮提示中最多加入的记忆图片数（用输入的文本在多模态空间中查找）；0 关闭媒体回忆",
    ),
    (
        "core.memory.media.recall_min_score",
        "图片被回忆所需的、与输入文本之间的最低余弦相似度",
    ),
    // Security.
    (
        "core.security.tool_allow",
        "智能体可调用的工具（逗号分隔的名称或通配符，如 mcp__*）；留空则允许所有未被禁止的工具",
    ),
    (
        "core.security.tool_deny",
        "智能体绝不可调用的工具（逗号分隔的名称或通配符）；禁止优先于允许",
    ),
    (
        "core.security.sandbox.read_roots",
        "除可写根目录外，工具还可读取的目录（逗号分隔的绝对路径）",
    ),
    (
        "core.security.sandbox.write_roots",
        "工具可读写的目录（逗号分隔的绝对路径）；第一个是工具的工作目录",
    ),
    ("core.security.sandbox.network", "工具是否可以访问网络"),
    (
        "core.security.confinement",
        "由内核（Landlock）限制每个子进程插件及其运行的命令：只能访问沙箱根目录、插件自己的目录和系统的只读目录，绝不能碰守护进程的数据、端口或环境。关闭后它们拥有守护进程的全部权限；插件重启后生效",
    ),
    (
        "core.security.secrets",
        "工具可用的密钥：模型只看到 @{name}，真实值在工具运行时才填入",
    ),
    (
        "core.security.secret_destinations",
        r#"每个密钥可去往何处：{"<name>": {"hosts": ["api.example.com", "*.example.com"], "tools": ["web_fetch"], "in_query": false}}。密钥只经网络发往它的 `hosts`，只为所列工具写进命令行，且从不为访客使用"#,
    ),
    ("core.security.review", "在工具结果中发现提示注入或敏感数据时提醒模型"),
    (
        "core.security.approval",
        "有风险的工具调用何时要等你同意（WebUI、CLI /approve、POST /api/v1/approvals/<id>）：`untrusted` = 本轮读过网页、MCP 回答、被标记的工具结果或访客的话之后；`always` = 总是；`never` = 从不",
    ),
    ("core.security.approval_tools", "调用前先询问的工具（逗号分隔的通配符）"),
    (
        "core.security.approval_rules",
        "按工具覆盖上面两项的规则，先匹配的生效：`glob=always|ask|never, …`（`always` = 从不询问，`ask` = 每次都问，`never` = 拒绝）；如 `cmd_run=ask, plugin_install=never`",
    ),
    (
        "core.security.owner_only_tools",
        "只有主人的输入才能调用的工具（逗号分隔的通配符）；插件标为访客身份的输入不得调用",
    ),
    // Agent.
    (
        "core.agent.tool_timeout",
        "单次工具调用最长可运行多久，超时即取消并告诉模型",
    ),
    (
        "core.agent.outage_wait",
        "所有来源都失败或暂停时，已确认接收的（异步）输入等待 LLM 来源的时长，其间来源一恢复就重试，超时后进入死信列表（0 = 立即失败）",
    ),
    (
        "core.agent.max_turn_time",
        "一轮最多可工作多久，LLM 调用与工具合计（等待故障恢复的时间不计）；每次 LLM 调用前检查（0 = 不限）",
    ),
    (
        "core.agent.tool_tokens",
        "单次请求中工具定义（连同未提供的工具清单）最多占用的 token 数：只提供与输入相关的工具，其余调用一次 get_plugin_tools 即可取得（0 = 提供窗口份额内放得下的所有工具）",
    ),
    (
        "core.agent.max_tool_turns",
        "单个任务最多的工具调用轮数，超出即停止；0 表示不限",
    ),
    ("core.agent.max_context_size", "模型上下文中保留的最近事件数"),
    ("core.agent.distill_interval", "把近期对话提炼进记忆的间隔"),
    ("core.agent.archive_interval", "归档旧上下文的间隔"),
    ("core.agent.review_interval", "复查已存记忆的间隔"),
    ("core.agent.merge_interval", "合并重复记忆的间隔"),
    (
        "core.agent.maintenance_daily_tasks",
        "每天最多交给模型的记忆维护任务数（合并与复查）；每个任务一次模型调用，0 表示不做",
    ),
    ("core.agent.system_prompt", "每次对话开始时给模型的指令"),
    ("core.agent.personal_prompt", "用户的附加指令，接在系统提示词之后"),
    (
        "core.agent.language",
        "内核写给你或模型的所有文字（提示块、通知、错误、提醒、CLI 回复）所用的语言：en 或 zh；立即生效",
    ),
    (
        "core.agent.max_residents",
        "同时存在的常驻子代理上限（`resident_agents` `create` 创建的，以及分流助手）",
    ),
    (
        "core.agent.resident_max_tool_turns",
        "常驻子代理单个任务最多的工具调用轮数",
    ),
    (
        "core.agent.offload_enabled",
        "智能体长时间忙于一个任务时，把排队的消息交给临时的分流助手",
    ),
    (
        "core.agent.offload_busy_after",
        "一个任务运行多久之后，才把等待中的消息交给分流助手",
    ),
    (
        "core.agent.offload_min_pending",
        "至少有多少条消息在等待才移交（要么全部移交，要么都不；0 表示默认值 3）",
    ),
    (
        "core.agent.offload_max_residents",
        "同时存在的分流助手上限（0 表示默认值 2）",
    ),
    // Supervision.
    (
        "core.supervisor.max_restarts",
        "重启窗口内允许的重启次数，超出则把故障上报给上一级",
    ),
    (
        "core.supervisor.restart_window",
        "统计重启次数（与 max_restarts 比较）的时间窗口",
    ),
    ("core.supervisor.backoff_initial", "失败的组件第一次重启前的延迟"),
    ("core.supervisor.backoff_max", "两次重启之间的最长延迟"),
    (
        "core.supervisor.backoff_reset_after",
        "组件连续运行多久之后，其重启延迟重新从 backoff_initial 算起",
    ),
    (
        "core.supervisor.stuck_threshold",
        "组件在一个处理函数里停留多久即报告为卡住",
    ),
    // The QQ bridge (`plugins/onebot`, declared with `settings.registerDef`).
    (
        "plugin.onebot.url",
        "OneBot v11 正向 WebSocket 地址，如 ws://127.0.0.1:3001/（NapCat、Lagrange）",
    ),
    ("plugin.onebot.access_token", "以 Authorization: Bearer 发送"),
    ("plugin.onebot.owner_id", "主人的 QQ 号：其私聊消息以主人身份处理"),
    (
        "plugin.onebot.group_trigger",
        "回复哪些群消息：`mention`（默认，被 @ 时）、`all` 或 `off`",
    ),
];

/// `(field, Chinese)` of every field of an LLM source (`core.llm.sources.<name>.<field>`).
pub const SOURCE_FIELDS_ZH: &[(&str, &str)] = &[
    ("base_url", "服务商 API 的 HTTP 端点"),
    ("model", "发给服务商的模型名"),
    ("api_key", "此来源的 API 密钥；留空则用 core.llm.api_key"),
    ("adapter", "为该服务商转换请求的 Lua 适配器名"),
    ("adapter_path", "适配器脚本的路径，相对于数据目录"),
    ("priority", "自动回退时的使用顺序：数值大的先试"),
    ("max_concurrent", "同时发往此来源的最多请求数"),
    (
        "daily_tokens",
        "此来源每个 UTC 日最多可用的 token 数；到了上限由顺序中的下一个来源回答（0 = 不单独限制）",
    ),
    (
        "monthly_tokens",
        "此来源每个 UTC 自然月最多可用的 token 数；到了上限由顺序中的下一个来源回答（0 = 不单独限制）",
    ),
    (
        "daily_usd",
        "此来源每个 UTC 日最多可花的美元，按 core.llm.prices 计价；最坏情况已放不下的调用交给顺序中的下一个来源（0 = 不单独限制）",
    ),
    (
        "monthly_usd",
        "此来源每个 UTC 自然月最多可花的美元，规则同 daily_usd（0 = 不单独限制）",
    ),
    ("context_window", "模型的上下文长度（token 数）；0 表示未知"),
    ("thinking_enabled", "模型支持时，要求它输出推理过程"),
    ("connect_timeout", "与此来源建立连接（TCP 与 TLS）的最长等待；默认 10s"),
    (
        "first_byte_timeout",
        "从发出请求到响应开始的最长等待；默认 3m，照顾较慢的推理模型",
    ),
    ("idle_timeout", "响应或流中两段数据之间的最长静默；默认 2m"),
    ("vision", "模型能接收图片"),
    ("audio", "模型能接收音频"),
];

/// `(tool, Chinese)` of every tool the kernel registers (memory, knowledge, documents,
/// the plugin manager, helpers, residents, `seq_run`, `selftest`, `skill_info`) and
/// of every bundled plugin's tools (timer, files, cmd, web, terminal, units). Not here:
/// the MCP bridge's `mcp__<server>__<tool>` (the servers' own, in their words) and the
/// `output_send__<channel>` tools (made per channel from its description).
pub const TOOLS_ZH: &[(&str, &str)] = &[
    // The graph memory.
    (
        "memory_recall",
        "回忆长期记忆：与查询匹配的实体及其关系。多个关键词用逗号分隔。",
    ),
    ("memory_commit", "把事实以“主语-关系-宾语”三元组写入长期记忆。"),
    ("memory_edit", "更正记住的一条事实：给出旧的三元组和要改的字段。"),
    (
        "memory_merge",
        "合并指同一事物的两个实体；source 被删除，它的关系移到 target 上。",
    ),
    (
        "memory_block_merge",
        "在接下来 `rounds` 轮整理中不再提议合并这两个实体（它们是不同的东西）。",
    ),
    ("memory_delete_entity", "从长期记忆中删除一个实体及其全部关系。"),
    (
        "memory_purge",
        "删除同时满足所有给定条件的关系（subject/target 包含的子串、完全一致的关系名）。mode 为 soft（默认）时可恢复，hard 则彻底删除。",
    ),
    (
        "memory_introspect",
        "长期记忆的统计：实体数、关系数和被提到最多的实体。",
    ),
    ("person_query", "某人的档案：已记录的特征和社会关系。"),
    ("person_set_trait", "记录某人的一项特征（替换同一特征的旧值）。"),
    ("person_relate", "记录两人之间的关系（person_a —relation→ person_b）。"),
    ("person_network", "某人若干层关系以内的人，连同他们的特征和关系。"),
    // The knowledge base and the document memory.
    ("knowledge_search", "在知识库（特意写下的笔记）中搜索。"),
    ("knowledge_list", "以树形列出知识库。"),
    ("knowledge_create", "创建或覆盖一条知识（可写成 `category/name`）。"),
    ("knowledge_delete", "删除一条知识。"),
    (
        "doc_query",
        "把与查询匹配的已归档对话文档载回时间线（它们仍保留在存档中）。",
    ),
    ("doc_commit", "把一篇文档存入长期文档记忆。"),
    // The plugin manager.
    (
        "plugin_list",
        "列出已安装的插件：名称、类型（process、lua、skill）、状态（starting、running、backoff、quarantined、disabled、stopped；idle：启用后才启动）、工具和重启次数。无参数。",
    ),
    (
        "plugin_enable",
        r#"启用一个已禁用的插件并启动它；守护进程重启后依然有效。也可启动一个空闲（idle）插件（按其技能说明，等待被调用时才启动的插件）。示例：{"name": "web"}"#,
    ),
    (
        "plugin_disable",
        r#"停止一个插件，守护进程重启后也保持停止；它的工具从下一次请求起消失。示例：{"name": "web"}"#,
    ),
    (
        "plugin_reload",
        r#"重启一个插件并重新读取它的入口文件（也能解除反复崩溃后的隔离）。示例：{"name": "web"}"#,
    ),
    (
        "plugin_install",
        r#"从沙箱可读根目录内的文件安装 .hmap 插件包并立即启动（除非其清单写明 auto_start: false：那时它保持空闲，直到 plugin_enable）；启动不了的包会被回滚。示例：{"path": "downloads/notes.hmap"}"#,
    ),
    (
        "llm_source_use",
        r#"把一个已配置的 LLM 来源设为首选（请求最先问它，其余来源仍作后备）。设置会保存。示例：{"source": "deepseek"}"#,
    ),
    (
        "get_plugin_tools",
        r#"按插件列出工具。不带参数（或为 ""）：每个插件及其工具名；带 {"plugin": name}：该插件的工具及其说明和参数。"#,
    ),
    (
        "output_list_channels",
        "列出输出通道：能力、普通回复能否送达（同步）以及发送工具。不确定消息能发到哪里、怎么发时调用。无参数。",
    ),
    // The agent's own.
    (
        "seq_run",
        r#"把多个工具调用合成一次：各步按顺序运行，遇到第一个失败就停；{"parallel": [steps]} 这样的一步会同时运行其中各步。每一步都像直接调用一样受检查。返回 JSON {ok, steps: [{step, tool, status, result}], stopped_at?, not_run?}。示例：{"steps": [{"tool": "files_write", "args": {"path": "a.txt", "content": "hi"}}, {"tool": "files_read", "args": {"path": "a.txt"}}]}"#,
    ),
    (
        "persona_set",
        "设定你的人格：你的名字、你怎么称呼主人、你的语气，以及关于你是谁的其他文字。会替换整个人格设定（要保留的内容请一并传入）。这次调用需要主人确认。",
    ),
    (
        "settings_get",
        "列出键以 `prefix` 开头的守护进程设置（为空则全部）：当前值（密钥已遮盖）、作用，以及你能否用 settings_set 修改。",
    ),
    (
        "settings_set",
        r#"修改守护进程的部分设置：{"values": {键: 值}}。安全设置、密钥、地址、URL 和路径只归主人管。每次修改都记在你名下，主人可以撤回。"#,
    ),
    (
        "selftest",
        "检查智能体自身：每个 LLM 来源回答一次最小调用，向量模型生成一次测试向量，每个数据库通过完整性检查，每个插件带着它的工具在运行。每部分一行（OK、FAIL、N/C = 未配置、OFF = 已禁用），最后给出结论。无参数；需要几秒钟（失败的来源会重试一次）。",
    ),
    (
        "spawn_child",
        "启动一个助手，与你并行、独立完成一项自成一体的工作（工具与你相同，只是没有输出通道，也不能再开助手）。立即返回它的 id；它结束时你会收到消息，再用 child_result 取它的回答。用来把互不依赖的工作分头去做。",
    ),
    (
        "child_result",
        "按 id（child_<n>）取得用 spawn_child 启动的助手的回答。第一次调用返回回答；之后再调用会说明已交付。",
    ),
    (
        "resident_agents",
        "管理常驻子代理：有自己队列和临时记忆的轻量助手，在你身边处理一项长期任务，每轮都向你汇报。操作：list；create（id、task）；send（id、text：紧急指令，优先执行）；inspect（id：状态、队列、轮次）；compress（id：精简它的上下文）；reclaim 或 destroy（id、residual：keep = 它的待办回到你的队列（默认），drop = 丢弃）。",
    ),
    (
        "notify_parent",
        "现在就告诉主助手（你的上级）一件事——进展、发现或问题——而不结束你的任务。你的最终回答无论如何都会汇报给它。",
    ),
    (
        "inputch_note",
        "亲自写下本轮在上级的工作表里的那一行（做了什么、还剩什么），代替根据你的输入和回答自动生成的摘要。",
    ),
    ("skill_info", "读取系统提示词 # Skills 下所列某个技能的完整说明。"),
    // timer
    (
        "timer_set",
        "设置提醒：延时到点后（可选重复），你会收到一条带着该消息的打断。",
    ),
    ("timer_list", "列出生效中的定时器。"),
    ("timer_cancel", "按编号取消定时器（见 timer_list）。"),
    // memo
    (
        "memo_add",
        "保存一条笔记（正文，可选标签），可附提醒：到 `remind_at` 时你会收到一条带着该笔记的打断。`remind_at`：延时（`10m`、`1h30m`、`2d`）、钟点（`18:30`）或日期加时间（`2026-05-08 18:30`，除非给出 `+08:00` 这样的时区偏移，否则按本地时间）。",
    ),
    (
        "memo_list",
        "列出笔记，新的在前：默认只列未完成的，除非给出 `include_done`；给出 `tag` 时只列带该标签的。",
    ),
    (
        "memo_search",
        "查找正文或标签包含 `query` 中每个词的笔记（不区分大小写；中文无需空格）。",
    ),
    (
        "memo_update",
        "按编号修改笔记（见 memo_list）：新的 `text`、`tags`（替换原有标签）或 `remind_at`（`none` 去掉提醒；给新时间则重新设置）。",
    ),
    (
        "memo_done",
        "按编号把笔记标为完成；尚未到期的提醒随之取消。已完成的笔记用 `include_done` 仍可查到。",
    ),
    ("memo_delete", "按编号永久删除笔记。"),
    // files
    (
        "files_read",
        "读取沙箱根目录内的文本文件（相对路径从工作目录算起）。先答 `PATH (lines A-B of N):`，再给正文。长文件请给出 start_line/end_line（从 1 开始）；超过 16 KiB 的输出会被截断并加标记。拒绝二进制文件。",
    ),
    (
        "files_write",
        "在可写根目录内创建或覆盖文本文件（父目录会自动创建）。`append: true` 则追加到末尾。每次最多 4 MiB。只改文件的一部分请用 files_edit。",
    ),
    (
        "files_edit",
        "替换文件中一段确切的文字：`old` 必须恰好出现一次（从 files_read 的结果复制，空白也要一致；出现多次时带上前后几行）。`new` 可为空，即删除。",
    ),
    (
        "files_list",
        "以树形列出沙箱根目录内的目录（默认：工作目录，深度 1，200 项；深度最多 6，数量最多 2000）。符号链接只显示，不跟随。",
    ),
    (
        "files_search",
        "在目录下（默认：工作目录）搜索文件内容：包含 `pattern` 的行（纯文本；`regex: true` 则为正则表达式），格式为 `PATH:LINE: text`。跳过二进制文件、超过 2 MiB 的文件和符号链接；最多 `max_results` 条（默认 50，最多 500）。",
    ),
    // cmd
    (
        "cmd_run",
        "运行一个程序，取得退出码、stdout 和 stderr。给出 `argv`（数组：程序及参数，不经 shell）或 `command`（一行 shell 命令，可用管道和重定向，由 /bin/sh -c 运行）。在 `cwd`（沙箱根目录内；默认工作目录）中以最小环境运行；超过 `timeout_secs`（默认 30，最多 600）即被终止。stdout 和 stderr 各截断到 16 KiB。非零退出码作为错误报告，附带输出。主人禁止列表上的命令会被拒绝。读写文件请优先用 files_*。",
    ),
    // web
    (
        "web_fetch",
        "获取一个 http(s) URL 并读成文本：HTML 转为纯文本，链接编号列为脚注；JSON 格式化输出；其他文本原样显示；拒绝图片和其他二进制内容。在 `timeout_secs`（默认 20）内最多下载 `max_bytes`（默认 2 MiB）；回答截断到 16 KiB。不知道 URL 时先用 web_search。",
    ),
    (
        "web_search",
        "搜索网页：返回编号的结果列表（标题、URL、摘要）；再用 web_fetch 打开某个 URL 阅读。返回 `count` 条结果（默认 5，最多 20）。",
    ),
    // terminal
    (
        "terminal_create",
        r#"在真实 PTY 上启动一个跨轮次保持打开的交互式终端会话（一次性命令请用 cmd_run）。默认：交互式 bash；也可给出 `argv`（程序及参数）或 `command`（一行 shell 命令，如 "python3" 或 "top"）。`cwd` 必须在沙箱根目录内（默认：工作目录）。返回会话编号，供 terminal_send / terminal_read / terminal_close 使用。会话数量有上限，长时间空闲后会关闭。"#,
    ),
    (
        "terminal_send",
        r"向终端会话输入：`text` 原样发送（shell 命令以 \n 结尾），再按名称发送 `keys`：Enter、Tab、Esc、Backspace、Up、Down、Left、Right、Home、End、PageUp、PageDown、Delete、`C-a`..`C-z`（`C-c` 中断，`C-d` 结束输入）。用 terminal_read 查看效果。",
    ),
    (
        "terminal_read",
        r#"读取终端会话自你上次读取以来的输出。最多等待 `timeout_ms`（默认 2000，最多 30000），直到输出到达并稳定下来；给了 `until` 则等到输出中出现该文字（如提示符或命令打印的某个词）。每次最多读 `max_bytes`（默认 8192，最多 65536），后面还有时会说明。除非 `ansi` 为 `true`，转义序列会先生效再去除。`offset` 从更早的字节位置重读，不移动你的读取位置；`format: "json"` 返回 {data, offset, next, ...}。"#,
    ),
    (
        "terminal_close",
        "结束一个终端会话：它的程序以及它在会话中启动的一切都被终止。",
    ),
    (
        "terminal_list",
        "列出打开的终端会话（编号、命令、工作目录、状态、输出字节数、未读字节数）。",
    ),
    // units (Lua)
    (
        "units_convert",
        "在单位之间精确换算数量（长度、质量、体积、面积、温度、速度、数据大小、时间）。用它，而不要心算。",
    ),
    ("units_list", "按量纲列出 units_convert 认识的单位。"),
];

fn find(table: &'static [(&'static str, &'static str)], key: &str) -> Option<&'static str> {
    table.iter().find(|(k, _)| *k == key).map(|(_, zh)| *zh)
}

/// The Chinese description of a setting by its full key (`core.agent.max_tool_turns`,
/// `plugin.onebot.url`); `None` for a key the catalog does not know (a third-party
/// plugin's setting).
pub fn setting_zh(key: &str) -> Option<&'static str> {
    find(SETTINGS_ZH, key)
}

/// The Chinese description of an LLM source field (`base_url`, `daily_tokens`, …).
pub fn source_field_zh(name: &str) -> Option<&'static str> {
    find(SOURCE_FIELDS_ZH, name)
}

/// The Chinese description of a tool by its name; `None` for a tool the catalog does
/// not know (a third-party plugin's, an MCP server's).
pub fn tool_zh(name: &str) -> Option<&'static str> {
    find(TOOLS_ZH, name)
}

/// Whether `s` holds a CJK ideograph or CJK punctuation.
pub fn has_cjk(s: &str) -> bool {
    s.chars().any(|c| {
        ('\u{4e00}'..='\u{9fff}').contains(&c)
            || ('\u{3000}'..='\u{303f}').contains(&c)
            || ('\u{ff00}'..='\u{ffef}').contains(&c)
    })
}

/// Checks a Chinese description against its English: it is Chinese, and it keeps every
/// number and every name of the English (a run of letters, digits, `_`, `.` and `*`
/// that holds a `_` or two dots: `core.llm.prices`, `get_plugin_tools`, `mcp__*`).
/// So a changed limit or a renamed setting in the English shows up as a failing test
/// until the Chinese follows. The error names what is missing.
pub fn check_zh(en: &str, zh: &str) -> Result<(), String> {
    if !has_cjk(zh) {
        return Err(format!("not Chinese: {zh:?}"));
    }
    let numbers = |s: &str| -> Vec<String> {
        s.split(|c: char| !c.is_ascii_digit())
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let names = |s: &str| -> Vec<String> {
        s.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '*')))
            .map(|w| w.trim_end_matches('.'))
            .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic()))
            .filter(|w| w.contains('_') || (w.matches('.').count() >= 2 && w.split('.').all(|p| !p.is_empty())))
            .map(str::to_owned)
            .collect()
    };
    let zh_numbers = numbers(zh);
    let missing: Vec<String> = numbers(en)
        .into_iter()
        .filter(|n| !zh_numbers.contains(n))
        .chain(names(en).into_iter().filter(|n| !zh.contains(n.as_str())))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("the Chinese lacks {missing:?} of the English {en:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_is_chinese_and_named_once() {
        for table in [SETTINGS_ZH, SOURCE_FIELDS_ZH, TOOLS_ZH] {
            for (i, (key, zh)) in table.iter().enumerate() {
                assert!(has_cjk(zh), "{key}: {zh}");
                assert_eq!(zh.trim(), *zh, "{key}: surrounding spaces");
                assert!(
                    table[i + 1..].iter().all(|(k, _)| k != key),
                    "{key} is in the table twice"
                );
            }
        }
        assert!(SETTINGS_ZH.iter().all(|(k, _)| k.contains('.')));
        assert!(SOURCE_FIELDS_ZH.iter().all(|(k, _)| !k.contains('.')));
    }

    #[test]
    fn lookups_find_their_entries_and_nothing_else() {
        assert!(setting_zh("core.agent.max_tool_turns").is_some_and(has_cjk));
        assert!(setting_zh("plugin.onebot.url").is_some_and(|t| t.contains("WebSocket")));
        assert_eq!(setting_zh("plugin.someone.else"), None);
        assert!(source_field_zh("base_url").is_some_and(has_cjk));
        assert_eq!(source_field_zh("core.llm.max_tokens"), None);
        assert!(tool_zh("files_read").is_some_and(has_cjk));
        assert_eq!(tool_zh("mcp__everything__echo"), None);
    }

    #[test]
    fn the_check_wants_chinese_with_the_numbers_and_names_of_the_english() {
        let en = "Most tool-call rounds in one task; see core.agent.max_tool_turns and files_*. 0 means unlimited.";
        assert!(
            check_zh(
                en,
                "单个任务最多的工具调用轮数；见 core.agent.max_tool_turns 和 files_*。0 表示不限"
            )
            .is_ok()
        );
        let err = check_zh(en, "单个任务最多的工具调用轮数；见 files_*。").unwrap_err();
        assert!(
            err.contains("\"0\"") && err.contains("core.agent.max_tool_turns"),
            "{err}"
        );
        assert!(check_zh("Default model name", "Default model name").is_err());
        // "e.g." and a file name with one dot are words, not names; "C-a..C-z" neither.
        assert!(check_zh("e.g. notes.hmap, C-a..C-z", "如某个文件").is_ok());
        // A number is one run of digits: 2000 does not stand in for 200.
        assert!(check_zh("200 entries", "2000 项").is_err());
    }
}

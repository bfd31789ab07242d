// Strings per language. Every key exists in both; {name} placeholders are filled by t().
const STRINGS = {
  en: {
    "nav.fleet": "Fleet", "nav.idle": "Idle GPUs", "nav.recommendations": "Recommendations",
    "nav.energy": "Energy and carbon", "signout": "Sign out",
    "login.title": "Sign in", "login.token": "API token", "login.submit": "Sign in",
    "login.help": "Paste an API token of this collector. It stays in this browser tab only.",
    "login.refused": "The collector refused this token.",
    "updated": "data as of {time}", "loading": "Loading…", "error": "Could not load: {why}",
    "state.active": "active", "state.allocated_idle": "allocated, idle",
    "state.unallocated": "unallocated", "state.unknown": "unknown",
    "fleet.title": "Fleet", "fleet.gpus": "GPUs", "fleet.utilisation": "Fleet utilisation",
    "fleet.utilisation.note": "mean SM activity", "fleet.waste_now": "Waste now",
    "fleet.waste_today": "Waste today", "fleet.waste_today.note": "since 00:00 UTC",
    "fleet.power": "Power", "fleet.states": "GPUs by state", "fleet.nodes": "Nodes",
    "fleet.idle_gpus": "{n} idle", "fleet.more": "Show {n} more nodes ({left} not shown)", "fleet.holder": "held by {who}", "fleet.free": "nobody holds it",
    "fleet.duplicates": "The same GPU reported by two nodes",
    "fleet.duplicate": "{uuid}: reported by {node}; {by} claims it too, {n} batch(es) refused. A cloned VM image or a misconfigured agent: give each node its own GPUs and name.",
    "idle.title": "Idle GPUs", "idle.count": "Idle GPUs now", "idle.waste_now": "Wasting now",
    "idle.energy_today": "Idle energy today", "idle.none": "No GPU is idle right now.",
    "col.gpu": "GPU", "col.model": "Model", "col.holder": "Holder", "col.idle_since": "Idle since",
    "col.idle_for": "Idle for", "col.cost_hour": "Cost per hour", "col.power": "Power now",
    "col.idle_energy": "Idle energy today", "col.kind": "Kind", "col.subject": "Subject",
    "col.evidence": "Evidence", "col.saves_money": "Saves per month",
    "col.saves_energy": "kWh per month", "col.saves_carbon": "kgCO2e per month",
    "col.status": "Status", "col.action": "", "col.namespace": "Namespace", "col.team": "Team",
    "col.workload": "Workload", "col.energy": "Energy", "col.carbon": "Carbon", "col.cost": "Cost",
    "col.idle_cost": "Idle cost", "col.episodes": "Idle episodes", "col.share": "Share",
    "unallocated": "(unallocated)", "none": "(none)",
    "rec.title": "Recommendations", "rec.dismiss": "Dismiss", "rec.open_count": "Open",
    "rec.saves_money": "Savings per month", "rec.saves_energy": "Energy per month",
    "rec.saves_carbon": "Carbon per month", "rec.none": "No recommendations in this view.",
    "rec.show": "Show", "rec.show.live": "open and notified", "rec.show.all": "all",
    "rec.dismissed": "Dismissed {subject}.",
    "kind.release_idle": "release idle GPUs", "kind.scale_down": "scale down",
    "kind.right_size": "right-size", "kind.pricing_plan": "pricing plan",
    "kind.consolidate": "consolidate",
    "col.seen": "Seen for",
    "rec.confidence": "confidence {p}",
    "rec.range": "{low} if it lasts as long again as seen, {high} if it lasts the month ({cur})",
    "status.open": "open", "status.notified": "notified", "status.acted": "acted",
    "status.resolved": "resolved", "status.dismissed": "dismissed",
    "wl.title": "Workload", "wl.missing": "No workload {key} has usage in the last 24 h.",
    "wl.window": "last 24 h (whole hours)", "wl.energy": "Energy", "wl.carbon": "Carbon",
    "wl.cost": "GPU cost", "wl.idle_cost": "Idle cost", "wl.episodes": "Idle episodes",
    "wl.longest": "Longest idle", "wl.gpus_now": "GPUs held now", "wl.no_gpus": "It holds no GPU now.",
    "wl.activity": "SM activity", "wl.memory": "Memory used", "wl.power": "Power",
    "wl.charts": "Its GPUs over the last hours (per-minute means; memory: peak)",
    "wl.kind": "Kind", "wl.namespace": "Namespace", "wl.team": "Team", "wl.user": "User",
    "wl.models": "GPU models",
    "en.title": "Energy and carbon", "en.window": "Window", "en.today": "today (UTC)",
    "en.day": "last 24 h", "en.week": "last 7 days", "en.energy": "Fleet energy",
    "en.carbon": "Fleet carbon", "en.cost": "GPU cost", "en.waste": "Idle cost",
    "en.by_namespace": "By namespace", "en.by_team": "By team", "en.workloads": "Workloads",
    "dur.hm": "{h} h {m} min", "dur.m": "{m} min", "gpu.label": "{node} #{index}",
    "nav.plans": "Plans", "plans.title": "Plans: reserved baseline and on-demand peaks",
    "plans.window": "{start} to {end} (whole hours; {hours} h of them with data), in {cur}", "plans.pool": "Pool", "plans.gpus": "GPUs",
    "plans.today": "Bought today", "plans.cheapest": "Cheapest mix",
    "plans.cost.today": "Cost today", "plans.cost.recommended": "Cheapest mix",
    "plans.cost.all_on_demand": "All on demand", "plans.cost.all_reserved": "All reserved",
    "plans.idle_removed": "Cheapest, idle removed", "plans.risk": "Saving if usage -20%",
    "plans.total": "Total", "plans.saving": "Saving", "plans.saving_idle": "Saving, idle GPUs released",
    "plans.none": "No GPU usage in this window.",
    "plans.all_on_demand_n": "all {n} on demand", "plans.mix": "{r} on {plan}, {rest} on demand",
    "plan.monthly": "a monthly plan", "plan.1y": "a 1-year plan", "plan.3y": "a 3-year plan",
    "plan.on_demand": "on demand",
    "plans.assumption": "On-demand GPUs are counted per allocated hour (unallocated on-demand capacity is for scale-down); reserved GPUs are paid every hour.",
    "plans.util.title": "Utilisation target", "plans.util.none": "No known GPU time in this window.",
    "plans.util.gap": "Utilisation {actual} (active share of GPU time), target {target}: gap {gap}.",
    "plans.util.closes": "{title}: utilisation to {after}",
    "plans.util.nothing": "No open recommendation frees GPUs.",
    "plans.util.after_all": "All of them: utilisation to {after}.",
  },
  zh: {
    "nav.fleet": "集群", "nav.idle": "空闲 GPU", "nav.recommendations": "优化建议",
    "nav.energy": "能耗与碳排放", "signout": "退出",
    "login.title": "登录", "login.token": "API 令牌", "login.submit": "登录",
    "login.help": "粘贴此采集器的 API 令牌。令牌只保存在当前浏览器标签页中。",
    "login.refused": "采集器拒绝了此令牌。",
    "updated": "数据时间 {time}", "loading": "加载中…", "error": "加载失败：{why}",
    "state.active": "运行中", "state.allocated_idle": "已分配但空闲",
    "state.unallocated": "未分配", "state.unknown": "未知",
    "fleet.title": "集群", "fleet.gpus": "GPU 数", "fleet.utilisation": "集群利用率",
    "fleet.utilisation.note": "平均 SM 活跃度", "fleet.waste_now": "当前浪费",
    "fleet.waste_today": "今日浪费", "fleet.waste_today.note": "自 UTC 00:00 起",
    "fleet.power": "功率", "fleet.states": "各状态 GPU", "fleet.nodes": "节点",
    "fleet.idle_gpus": "{n} 块空闲", "fleet.more": "再显示 {n} 个节点（还有 {left} 个未显示）", "fleet.holder": "占用者 {who}", "fleet.free": "无人占用",
    "fleet.duplicates": "同一块 GPU 由两个节点上报",
    "fleet.duplicate": "{uuid}：由 {node} 上报；{by} 也声称拥有它，已拒绝 {n} 个批次。可能是克隆的虚拟机镜像或配置错误的 agent：请让每个节点使用自己的 GPU 与名称。",
    "idle.title": "空闲 GPU", "idle.count": "当前空闲 GPU", "idle.waste_now": "当前浪费",
    "idle.energy_today": "今日空闲能耗", "idle.none": "当前没有空闲的 GPU。",
    "col.gpu": "GPU", "col.model": "型号", "col.holder": "占用者", "col.idle_since": "空闲起始",
    "col.idle_for": "已空闲", "col.cost_hour": "每小时成本", "col.power": "当前功率",
    "col.idle_energy": "今日空闲能耗", "col.kind": "类型", "col.subject": "对象",
    "col.evidence": "依据", "col.saves_money": "每月节省",
    "col.saves_energy": "每月 kWh", "col.saves_carbon": "每月 kgCO2e",
    "col.status": "状态", "col.action": "", "col.namespace": "命名空间", "col.team": "团队",
    "col.workload": "工作负载", "col.energy": "能耗", "col.carbon": "碳排放", "col.cost": "成本",
    "col.idle_cost": "空闲成本", "col.episodes": "空闲时段", "col.share": "占比",
    "unallocated": "（未分配）", "none": "（无）",
    "rec.title": "优化建议", "rec.dismiss": "忽略", "rec.open_count": "待处理",
    "rec.saves_money": "每月可节省", "rec.saves_energy": "每月节能",
    "rec.saves_carbon": "每月减碳", "rec.none": "此视图中没有建议。",
    "rec.show": "显示", "rec.show.live": "待处理和已通知", "rec.show.all": "全部",
    "rec.dismissed": "已忽略 {subject}。",
    "kind.release_idle": "释放空闲 GPU", "kind.scale_down": "缩容",
    "kind.right_size": "调整规格", "kind.pricing_plan": "计费方案",
    "kind.consolidate": "整合腾挪",
    "col.seen": "已观察",
    "rec.confidence": "置信度 {p}",
    "rec.range": "若再持续同样时长约 {low}，若持续整月约 {high}（{cur}）",
    "status.open": "待处理", "status.notified": "已通知", "status.acted": "已执行",
    "status.resolved": "已解决", "status.dismissed": "已忽略",
    "wl.title": "工作负载", "wl.missing": "工作负载 {key} 在过去 24 小时内没有用量。",
    "wl.window": "过去 24 小时（整点）", "wl.energy": "能耗", "wl.carbon": "碳排放",
    "wl.cost": "GPU 成本", "wl.idle_cost": "空闲成本", "wl.episodes": "空闲时段",
    "wl.longest": "最长空闲", "wl.gpus_now": "当前占用 GPU", "wl.no_gpus": "当前未占用 GPU。",
    "wl.activity": "SM 活跃度", "wl.memory": "显存使用", "wl.power": "功率",
    "wl.charts": "其 GPU 最近几小时的情况（每分钟均值；显存为峰值）",
    "wl.kind": "类型", "wl.namespace": "命名空间", "wl.team": "团队", "wl.user": "用户",
    "wl.models": "GPU 型号",
    "en.title": "能耗与碳排放", "en.window": "时间范围", "en.today": "今天（UTC）",
    "en.day": "过去 24 小时", "en.week": "过去 7 天", "en.energy": "集群能耗",
    "en.carbon": "集群碳排放", "en.cost": "GPU 成本", "en.waste": "空闲成本",
    "en.by_namespace": "按命名空间", "en.by_team": "按团队", "en.workloads": "工作负载",
    "dur.hm": "{h} 小时 {m} 分钟", "dur.m": "{m} 分钟", "gpu.label": "{node} #{index}",
    "nav.plans": "计费方案", "plans.title": "计费方案：包年包月基线与按量高峰",
    "plans.window": "{start} 至 {end}（整点；其中 {hours} 小时有数据），单位 {cur}", "plans.pool": "资源池", "plans.gpus": "GPU 数",
    "plans.today": "当前购买", "plans.cheapest": "最省组合",
    "plans.cost.today": "当前成本", "plans.cost.recommended": "最省组合",
    "plans.cost.all_on_demand": "全部按量", "plans.cost.all_reserved": "全部预留",
    "plans.idle_removed": "最省组合（去除空闲）", "plans.risk": "用量降 20% 时的节省",
    "plans.total": "合计", "plans.saving": "节省", "plans.saving_idle": "释放空闲 GPU 后的节省",
    "plans.none": "此时间范围内没有 GPU 用量。",
    "plans.all_on_demand_n": "全部 {n} 块按量", "plans.mix": "{r} 块{plan}，{rest} 块按量",
    "plan.monthly": "包月", "plan.1y": "包一年", "plan.3y": "包三年", "plan.on_demand": "按量",
    "plans.assumption": "按量 GPU 按分配小时计费（未分配的按量容量属于缩容建议）；预留 GPU 每小时都计费。",
    "plans.util.title": "利用率目标", "plans.util.none": "此时间范围内没有已知的 GPU 时间。",
    "plans.util.gap": "利用率 {actual}（GPU 时间中活跃的比例），目标 {target}：差距 {gap}。",
    "plans.util.closes": "{title}：利用率升至 {after}",
    "plans.util.nothing": "没有可释放 GPU 的待处理建议。",
    "plans.util.after_all": "全部执行：利用率升至 {after}。",
  },
};

export const LANGUAGES = Object.keys(STRINGS);
const KEY = "gpufleet.lang";
let current = pickLanguage();

function pickLanguage() {
  const saved = localStorage.getItem(KEY);
  if (saved && saved in STRINGS) return saved;
  return (navigator.language || "en").toLowerCase().startsWith("zh") ? "zh" : "en";
}

export function lang() {
  return current;
}

export function setLang(code) {
  current = code in STRINGS ? code : "en";
  localStorage.setItem(KEY, current);
  document.documentElement.lang = current === "zh" ? "zh-CN" : "en";
}

export function t(key, values = {}) {
  const text = STRINGS[current][key] ?? STRINGS.en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (_, name) => String(values[name] ?? ""));
}

export function translateStatic(root = document) {
  for (const el of root.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
}

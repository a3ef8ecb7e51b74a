"""Texts of who may recall what (audience.py, docs/privacy.md): where a
memory was said, who sees it, and the group settings: code → (English, Chinese)."""

TEXTS: dict[str, tuple[str, str]] = {
    "config.group_form": ("{malformed} do not name a group (<platform>:<group id>, the group id, or *)",
                          "{malformed} 不是群的写法（<平台>:<群号>、群号或 *）"),
    "import.said_in": ("said_in must be a list of groups, each group:<id>",
                       "said_in 必须是群的列表，每项为 group:<id>"),
    # who may see a memory (the review page, the preview)
    "audience.private_chat": ("the private chat with {person}", "与 {person} 的私聊"),
    "audience.group": ("group {group}", "群 {group}"),
    "audience.nowhere": ("no chat (review only)", "任何聊天都不会（仅供审核）"),
    "audience.secret": ("{chats} only: asked to keep it secret", "仅 {chats}：说话人要求保密"),
    "audience.follows": ("{chats}; in this group as a profile fact private to {person}",
                         "{chats}；在本群作为 {person} 的私人资料出现"),
    "cmd.forget.done_private": ("Forgotten. (It was private to you, so its words are not repeated in this group.)",
                                "已忘记。（这条记忆是你的私人信息，不在群里复述。）"),
    # stored reasons (audit rows): English, shown via translate()
    "contexts.reason.moved": ("kept with the person it is about; the group it was said in may still recall it",
                              "改为归属于它所说的那个人；说出它的群仍可想起"),
    "contexts.reason.merged": ("the same fact the person said elsewhere: merged into their memory; the group it "
                               "was said in may still recall it",
                               "与此人在别处说过的同一事实合并；说出它的群仍可想起"),
    "contexts.reason.unplaced": ("no line tells where it was said: kept private, recalled in no group",
                                 "无法确定是在哪里说的：按私密处理，不会在任何群里被想起"),
}

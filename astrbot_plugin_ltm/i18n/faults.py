"""What is going wrong right now (astrbot_plugin_ltm/faults.py, docs/faults.md):
code → (English, Chinese). Shown to admins in /ltm status and in the stats API's notices."""

TEXTS: dict[str, tuple[str, str]] = {
    "fault.disk_full": (
        "The disk is full: {queued} recorded turn event(s) wait in memory and in the journal, and are written "
        "once there is space again.",
        "磁盘已满：{queued} 条已记录的对话事件在内存和日志中等待，腾出空间后会写入。"),
    "fault.write_failed": (
        "Writing recorded turns to the database fails ({error}): {queued} event(s) wait in the journal and "
        "are retried with a growing pause.",
        "把已记录的对话写入数据库失败（{error}）：{queued} 条事件在日志中等待，会以逐渐加长的间隔重试。"),
    "fault.db_busy": (
        "Another program holds the database's write lock: memory writes wait ({seconds} s so far); reads "
        "and replies go on.",
        "另一个程序占用了数据库的写锁：记忆的写入正在等待（已等 {seconds} 秒）；读取和回复照常进行。"),
    "fault.db_busy_gave_up": (
        "The database stayed locked by another program for {seconds} s; nothing was changed, try again in a "
        "minute.",
        "数据库被另一个程序锁住了 {seconds} 秒；没有任何改动，请一分钟后再试。"),
    "fault.journal": (
        "The journal cannot be written ({error}): {count} turn(s) are recorded but a crash before they reach "
        "the database would lose them.",
        "无法写入日志（{error}）：{count} 轮对话已记录，但若在写入数据库之前崩溃会丢失。"),
    "fault.journal_closed": (
        "The journal in {path} cannot be opened ({error}): turns are recorded, but a crash may lose the last "
        "second of them. Check that the plugin's data directory is writable.",
        "无法打开 {path} 中的日志（{error}）：对话照常记录，但崩溃时可能丢失最后一秒的内容。"
        "请检查插件数据目录是否可写。"),
    "fault.journal_kept": (
        "{files} journal file(s) could not be read by this version (written by a newer one, or damaged); they "
        "are kept as *.unreadable in {path}.",
        "有 {files} 个日志文件本版本无法读取（由更新的版本写入，或已损坏）；已以 *.unreadable 保留在 {path}。"),
    "fault.extraction": (
        "Learning from conversations fails ({error}): {events} event(s) stay pending and are retried at "
        "{retry_at} UTC.",
        "从对话中学习失败（{error}）：{events} 条事件保持待处理，将于 UTC {retry_at} 重试。"),
    "fault.vector_files": (
        "Vector index files cannot be written in {path} ({error}): search by meaning goes on from memory, and "
        "the files are rebuilt from the database at the next start.",
        "无法在 {path} 写入向量索引文件（{error}）：语义搜索照常在内存中进行，下次启动时会从数据库重建这些文件。"),
    "fault.clock_jump": (
        "The system clock jumped by {jump} while running: memory keeps time by the time elapsed until the next "
        "restart (no memory expires because of the jump).",
        "运行期间系统时钟跳变了 {jump}：在下次重启之前，记忆按实际经过的时间计时（不会因跳变而让记忆过期）。"),
    "fault.nothing_changed_disk_full": (
        "the disk is full, so nothing was changed; free some space and try again",
        "磁盘已满，没有任何改动；请腾出一些空间后再试"),
}

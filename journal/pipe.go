package journal

// pipeSize is asked for the pipe journalctl writes to (F_SETPIPE_SZ;
// Linux's default pipe-max-size is 1 MiB, its default pipe 64 KiB).
// journalctl writes through stdio, 4 KiB at a time: on a 64 KiB pipe a
// backlog keeps filling it, so journalctl blocks and the daemon wakes for
// every few pieces, and in a seek those wake-ups cost more of the daemon's
// CPU time than the parsing. With room for about 15 ms of journalctl's
// output it seldom blocks, and the daemon reads more per wake-up (make
// bench: a million-entry seek took a third fewer context switches and
// about 40% less CPU time). The pages are the kernel's, used only while
// the output is waiting.
const pipeSize = 1 << 20

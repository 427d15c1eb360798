package memsink

// native is this machine's layout.
var native = layoutAArch64

package search

import "syscall"

// syscallNoFollow opens a file without following a final symbolic link
// and without waiting (a named pipe without a writer).
const syscallNoFollow = syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_NOCTTY

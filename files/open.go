package files

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by the error of Read, Scan and Write for a named
// pipe, a socket, a device or anything else that is not a regular file (a
// directory gives EISDIR instead). The texts keep the words clients
// already match: "read /p: named pipes and sockets cannot be read",
// "read /dev/zero: devices cannot be read", "write /p: named pipes and
// sockets cannot be written", "write /dev/null: devices cannot be written".
var ErrNotRegular = errors.New("not a regular file")

// notRegularError is the text of a refusal of a file that is not regular;
// errors.Is matches it with ErrNotRegular.
type notRegularError string

func (e notRegularError) Error() string { return string(e) }

func (e notRegularError) Is(target error) bool { return target == ErrNotRegular }

// refusal is the error for an operation op ("read" or "write") on the file
// at path, of the given mode, that is not a regular file.
func refusal(op, path string, mode fs.FileMode) error {
	verb := op
	if op == "write" {
		verb = "written"
	}
	var text string
	switch {
	case mode&(fs.ModeNamedPipe|fs.ModeSocket) != 0:
		text = "named pipes and sockets cannot be " + verb
	case mode&fs.ModeDevice != 0: // block and character devices
		text = "devices cannot be " + verb
	default:
		text = "only regular files can be " + verb
	}
	return &fs.PathError{Op: op, Path: path, Err: notRegularError(text)}
}

// openRegular opens the regular file at path with flag (os.O_RDONLY, or
// os.O_WRONLY|os.O_CREATE) and, for a new file, mode 0644. Anything else
// is refused with an error wrapping ErrNotRegular (op, "read" or "write",
// names the operation in it) before a byte is read or written; a
// directory gives EISDIR. The caller closes the file.
//
// Nothing here can block: a named pipe, a terminal or a device whose open
// waits would otherwise hold an OS thread for good, even after the client
// has left, and enough of them end the agent ("thread exhaustion").
func openRegular(path string, flag int, op string) (*os.File, fs.FileInfo, error) {
	// Refuse what can be seen before opening it at all: opening a device
	// has effects of its own (/dev/ptmx makes a new terminal, a tape
	// rewinds, a watchdog starts). Following links, as open(2) does.
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
		return nil, nil, refusal(op, path, fi.Mode())
	}
	// The file may have changed since: open(2) must not wait all the
	// same. O_NONBLOCK returns at once from a named pipe without a peer
	// (ENXIO for a writer) and changes nothing for regular files;
	// O_NOCTTY keeps a terminal from becoming the agent's. No O_TRUNC:
	// only a file known to be regular is truncated.
	f, err := os.OpenFile(path, flag|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0o644)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	switch {
	case fi.Mode().IsRegular():
		return f, fi, nil
	case fi.IsDir(): // only a read gets here: open(2) refuses to write one
		f.Close()
		return nil, nil, &fs.PathError{Op: op, Path: path, Err: syscall.EISDIR}
	}
	f.Close()
	return nil, nil, refusal(op, path, fi.Mode())
}

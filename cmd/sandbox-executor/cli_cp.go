package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/sandbox-executor/sandbox-executor/client"
)

const cpDoc = `Copies one file between here and the sandbox, in either direction. A path
on the sandbox is written sandbox:PATH (sandbox:/tmp/a.txt; a relative
PATH is from the agent's working directory); any other argument is a
local path, and - is standard input (as SRC) or standard output (as DST).
If DST is a directory, or ends with /, the file keeps its name in it. A
local DST is replaced whole (written aside, then renamed), with the
remote file's permissions less group and other write. Files travel
through the JSON file endpoints: at most 48 MiB up and 64 MiB down.
`

// remotePrefix marks a path on the sandbox in cp's arguments. Only this
// exact prefix counts: a local file named "sandbox:x" is written ./sandbox:x.
const remotePrefix = "sandbox:"

// maxUpload is the largest file that write_file takes: its base64 must fit
// the agent's 64 MiB request body, with room for the rest of the JSON.
const maxUpload = 48<<20 - 64<<10

// cp runs "sandbox-executor cp SRC DST".
func (c *cli) cp(ctx context.Context, args []string) error {
	fs := c.flagSet("cp", "[flags] SRC DST", cpDoc)
	cf := addConnFlags(fs)
	paths, err := parse(fs, args, true)
	if err != nil {
		return err
	}
	if len(paths) != 2 {
		return c.usageError(fs, "want SRC and DST, got %d arguments", len(paths))
	}
	src, srcRemote := strings.CutPrefix(paths[0], remotePrefix)
	dst, dstRemote := strings.CutPrefix(paths[1], remotePrefix)
	switch {
	case srcRemote && dstRemote:
		return c.usageError(fs, "SRC and DST are both on the sandbox: copy there with exec -- cp")
	case !srcRemote && !dstRemote:
		return c.usageError(fs, "neither SRC nor DST is on the sandbox: write a path there as sandbox:PATH")
	case (srcRemote && src == "") || (dstRemote && dst == ""):
		return c.usageError(fs, "sandbox: needs a path after it, such as sandbox:/tmp/file")
	}
	cl, err := c.connect(cf, nil)
	if err != nil {
		return err
	}
	defer cl.CloseIdleConnections()
	if srcRemote {
		return c.download(ctx, cl, src, dst)
	}
	return c.upload(ctx, cl, src, dst)
}

// upload copies the local file src ("-" for stdin) to dst on the agent.
func (c *cli) upload(ctx context.Context, cl *client.Client, src, dst string) error {
	var r io.Reader = c.stdin
	name := ""
	if src != "-" {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		switch {
		case err != nil:
			return err
		case st.IsDir():
			return fmt.Errorf("%s is a directory: cp copies one file", src)
		case st.Size() > maxUpload:
			return tooLarge(src, st.Size())
		}
		r, name = f, filepath.Base(src)
	}
	target, err := remoteTarget(ctx, cl, dst, name)
	if err != nil {
		return err
	}
	return sendFile(ctx, cl, target, r, src)
}

// remoteTarget returns the path on the agent to write to: dst, or the file
// name in it if dst is a directory or ends with a slash.
func remoteTarget(ctx context.Context, cl *client.Client, dst, name string) (string, error) {
	isDir := strings.HasSuffix(dst, "/")
	if !isDir {
		info, err := cl.StatFile(ctx, dst)
		var ae *client.Error
		switch {
		case err == nil:
			isDir = info.IsDir
		case !errors.As(err, &ae) || ae.StatusCode != 200:
			return "", err // not the file system's answer: the agent is not usable
		} // else it does not exist (or cannot be inspected): the write will say
	}
	if !isDir {
		return dst, nil
	}
	if name == "" {
		return "", fmt.Errorf("sandbox:%s is a directory: give the file's name on the sandbox", dst)
	}
	return path.Join(dst, name), nil
}

// download copies the file src on the agent to the local dst ("-" for
// stdout).
func (c *cli) download(ctx context.Context, cl *client.Client, src, dst string) error {
	info, err := cl.StatFile(ctx, src)
	switch {
	case err != nil:
		return err
	case info.IsDir:
		return fmt.Errorf("sandbox:%s is a directory: cp copies one file", src)
	}
	if dst == "-" {
		return receiveFile(ctx, cl, src, c.stdout)
	}
	if st, err := os.Stat(dst); strings.HasSuffix(dst, "/") || (err == nil && st.IsDir()) {
		dst = filepath.Join(dst, path.Base(src))
	}
	perm := info.Mode.Perm() &^ 0o022
	if perm == 0 {
		perm = 0o644
	}
	return writeReplacing(dst, perm, func(w io.Writer) error { return receiveFile(ctx, cl, src, w) })
}

// writeReplacing writes a file at name through write, into a temporary file
// in the same directory that is renamed over name only once write and the
// close succeed: name is never left half-written.
func writeReplacing(name string, perm fs.FileMode, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".sandbox-cp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // fails harmlessly once renamed
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}

// sendFile and receiveFile are the only code that knows how a file's bytes
// travel. They use the JSON endpoints, which hold a whole file in memory on
// both sides; the streaming file endpoints, once the agent has them, take
// their place here, with the same signatures, at any size.

// sendFile writes everything r holds to the file path on the agent. what
// names r in errors.
func sendFile(ctx context.Context, cl *client.Client, path string, r io.Reader, what string) error {
	data, err := io.ReadAll(io.LimitReader(r, maxUpload+1))
	if err != nil {
		return err
	}
	if len(data) > maxUpload {
		return tooLarge(what, int64(len(data)))
	}
	return cl.WriteFile(ctx, path, data)
}

// receiveFile copies the file path on the agent to w.
func receiveFile(ctx context.Context, cl *client.Client, path string, w io.Writer) error {
	data, err := cl.ReadFile(ctx, path)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

func tooLarge(what string, size int64) error {
	if what == "-" {
		what = "standard input"
	}
	return fmt.Errorf("%s holds more than %d bytes, the most the agent's JSON file endpoint takes (%d bytes or more)", what, maxUpload, size)
}

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
	"github.com/sandbox-executor/sandbox-executor/files"
)

const cpDoc = `Copies a file, or with -r a directory, between here and the sandbox, in
either direction. A path on the sandbox is written sandbox:PATH
(sandbox:/tmp/a.txt; a relative PATH is from the agent's working
directory); any other argument is a local path, and - is standard input
(as SRC) or standard output (as DST).

If DST is a directory, or ends with /, SRC keeps its name in it;
otherwise DST is the copy. A file on the sandbox is replaced whole and
atomically, its missing parent directories created. A local DST file is
replaced whole too (written aside, then renamed), with the remote file's
permissions less group and other write. Files of any size stream through
GET and PUT /files.

With -r a directory travels as a tar stream (PUT /files?extract=tar and
GET /files?format=tar), merged into DST if it exists: symbolic links
stay links, and an archive entry that would land outside DST is refused.
With -r, - means a tar archive: "cp -r sandbox:/src -" writes one to
standard output, "cp -r - sandbox:/dst" unpacks one from standard input.
`

// remotePrefix marks a path on the sandbox in cp's arguments. Only this
// exact prefix counts: a local file named "sandbox:x" is written ./sandbox:x.
const remotePrefix = "sandbox:"

// cp runs "sandbox-executor cp [-r] SRC DST".
func (c *cli) cp(ctx context.Context, args []string) error {
	fs := c.flagSet("cp", "[flags] SRC DST", cpDoc)
	cf := addConnFlags(fs.FlagSet)
	recursive := fs.Bool("r", false, "copy directories, as tar streams")
	paths, err := c.parse(fs, args, true)
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
		return c.download(ctx, cl, src, dst, *recursive)
	}
	return c.upload(ctx, cl, src, dst, *recursive)
}

// upload copies the local file or directory src ("-" for stdin) to dst on
// the agent.
func (c *cli) upload(ctx context.Context, cl *client.Client, src, dst string, recursive bool) error {
	if src == "-" {
		prog := c.newProgress(0)
		defer prog.finish()
		if recursive {
			_, err := cl.ExtractArchive(ctx, dst, prog.reader(c.stdin), false)
			return err
		}
		target, err := remoteTarget(ctx, cl, dst, "")
		if err != nil {
			return err
		}
		return sendFile(ctx, cl, target, prog.reader(c.stdin), nil)
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return err
	case st.IsDir() && !recursive:
		return fmt.Errorf("%s is a directory: copy it with cp -r", src)
	}
	target, err := remoteTarget(ctx, cl, dst, filepath.Base(src))
	if err != nil {
		return err
	}
	if st.IsDir() {
		prog := c.newProgress(0)
		defer prog.finish()
		return sendTree(ctx, cl, src, target, prog)
	}
	prog := c.newProgress(st.Size())
	defer prog.finish()
	// The file's permissions less group and other write, as download
	// gives a local copy: an executable stays one.
	return sendFile(ctx, cl, target, prog.reader(f), &client.UploadOptions{Mode: st.Mode().Perm() &^ 0o022, Size: st.Size()})
}

// remoteTarget returns the path on the agent to write to: dst, or the
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

// download copies the file or directory src on the agent to the local dst
// ("-" for stdout).
func (c *cli) download(ctx context.Context, cl *client.Client, src, dst string, recursive bool) error {
	info, err := cl.StatFile(ctx, src)
	switch {
	case err != nil:
		return err
	case info.IsDir && !recursive:
		return fmt.Errorf("sandbox:%s is a directory: copy it with cp -r", src)
	}
	total := info.Size
	if info.IsDir {
		total = 0 // an archive's size is known only at its end
	}
	prog := c.newProgress(total)
	defer prog.finish()
	switch {
	case info.IsDir && dst == "-":
		_, err := cl.DownloadArchive(ctx, src, prog.writer(c.stdout), false)
		return err
	case dst == "-":
		return receiveFile(ctx, cl, src, prog.writer(c.stdout))
	}
	if st, err := os.Stat(dst); strings.HasSuffix(dst, "/") || (err == nil && st.IsDir()) {
		dst = filepath.Join(dst, path.Base(src))
	}
	if info.IsDir {
		return receiveTree(ctx, cl, src, dst, prog)
	}
	perm := info.Mode.Perm() &^ 0o022
	if perm == 0 {
		perm = 0o644
	}
	return writeReplacing(dst, perm, func(w io.Writer) error { return receiveFile(ctx, cl, src, prog.writer(w)) })
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
// travel, sendTree and receiveTree how a directory's do.

// sendFile writes everything r holds to the file path on the agent,
// streamed: any size. opts may be nil.
func sendFile(ctx context.Context, cl *client.Client, path string, r io.Reader, opts *client.UploadOptions) error {
	_, err := cl.Upload(ctx, path, r, opts)
	return err
}

// receiveFile copies the file path on the agent to w, streamed.
func receiveFile(ctx context.Context, cl *client.Client, path string, w io.Writer) error {
	_, err := cl.Download(ctx, path, w, nil)
	return err
}

// sendTree copies the local directory dir into the directory path on the
// agent, as a tar stream that the agent unpacks; prog counts it.
func sendTree(ctx context.Context, cl *client.Client, dir, path string, prog *progress) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go archiveTree(ctx, done, pw, dir)
	_, err := cl.ExtractArchive(ctx, path, prog.reader(pr), false)
	pr.CloseWithError(errors.New("upload over")) // an archiver nobody reads any more stops
	if aerr := <-done; aerr != nil && errors.Is(aerr, files.ErrArchiveSource) {
		return aerr // the local tree's failure explains the agent's
	}
	return err
}

// archiveTree writes the tree under dir to pw as a tar archive, then
// closes pw with the result.
//
// archiveTree runs in its own goroutine, started by sendTree, which waits
// for it; it ends when the tree is written, or when the pipe's reader is
// closed.
func archiveTree(ctx context.Context, done chan<- error, pw *io.PipeWriter, dir string) {
	err := files.WriteArchive(ctx, pw, dir, files.ArchiveOptions{})
	pw.CloseWithError(err)
	done <- err
}

// receiveTree copies the directory path on the agent to the local dir, as
// a tar stream unpacked here with the agent's own checks: nothing lands
// outside dir, and a cut stream changes nothing. prog counts it.
func receiveTree(ctx context.Context, cl *client.Client, path, dir string, prog *progress) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go fetchTree(ctx, done, cl, pw, prog.writer(pw), path)
	_, err := files.Extract(ctx, dir, pr, files.ExtractOptions{})
	pr.Close() // a download nobody reads any more stops, with io.ErrClosedPipe
	if ferr := <-done; ferr != nil {
		return ferr // the download's failure explains the unpacking's
	}
	return err
}

// fetchTree downloads the directory path on the agent as a tar archive
// into w, which writes to pw, then closes pw with the result.
//
// fetchTree runs in its own goroutine, started by receiveTree, which
// waits for it; it ends when the archive has come, or when the pipe's
// reader is closed.
func fetchTree(ctx context.Context, done chan<- error, cl *client.Client, pw *io.PipeWriter, w io.Writer, path string) {
	_, err := cl.DownloadArchive(ctx, path, w, false)
	pw.CloseWithError(err)
	if errors.Is(err, io.ErrClosedPipe) {
		err = nil // the unpacking stopped first; its error is the one to say
	}
	done <- err
}

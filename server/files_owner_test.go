package server

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/executor"
	"github.com/sandbox-executor/sandbox-executor/internal/testutil"
)

const nobodyUID = 65534

// nobodyDir returns a new directory of nobody's that nobody can reach
// (t.TempDir and its parent are 0700 and root's), with its parent.
func nobodyDir(t *testing.T) (dir, parent string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can act as another user")
	}
	parent = t.TempDir()
	require.NoError(t, os.Chmod(parent, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(parent), 0o755))
	dir = filepath.Join(parent, "work")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chown(dir, nobodyUID, nobodyUID))
	return dir, parent
}

func uidOf(t *testing.T, path string) uint32 {
	t.Helper()
	fi, err := os.Lstat(path)
	require.NoError(t, err)
	return fi.Sys().(*syscall.Stat_t).Uid
}

// The reported attack: nobody makes $WORKDIR/config.json a link to a
// file of root's, mode 0600. A plain PUT there used to overwrite that
// file as root; now it is a 403 and writes nothing, and so are append,
// offset and write_file.
func TestFilesPutPlantedLink(t *testing.T) {
	work, parent := nobodyDir(t)
	ts, _ := newTestServer(t, testServer{})
	secret := filepath.Join(parent, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("root's"), 0o600))
	link := filepath.Join(work, "config.json")
	cmd := exec.Command("ln", "-s", secret, link)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyUID, Gid: nobodyUID}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	for _, q := range [][]string{nil, {"append", "1"}, {"offset", "0"}} {
		resp := fileReq(t, ts, "PUT", filesURL(link, q...), strings.NewReader("pwned"))
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%v", q)
		assert.Contains(t, jsonReply(t, resp)["error"], "symbolic link owned by another user (uid 65534) is not followed")
	}
	code, body := call(t, ts, http.MethodPost, "/write_file", map[string]any{"path": link, "content": "pwned"})
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body["error"], "permission denied")
	got, err := os.ReadFile(secret)
	require.NoError(t, err)
	assert.Equal(t, "root's", string(got))
	assert.Empty(t, testutil.Leftovers(t, work))
}

// With user (or the session of a user), what /files and the JSON file
// operations create is that user's, directories included, and what that
// user may not write is refused.
func TestFilesUser(t *testing.T) {
	work, parent := nobodyDir(t)
	ts, _ := newTestServer(t, testServer{})
	code, body := call(t, ts, http.MethodPost, "/create_session", map[string]any{"id": "n", "user": "nobody"})
	require.Equal(t, http.StatusCreated, code, body)

	resp := fileReq(t, ts, "PUT", filesURL(filepath.Join(work, "a/b/f"), "user", "nobody"), strings.NewReader("x"))
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	resp = fileReq(t, ts, "PUT", filesURL(filepath.Join(work, "s/f"), "session", "n"), strings.NewReader("x"))
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	resp = fileReq(t, ts, "PUT", filesURL(filepath.Join(work, "c/g"), "user", "65534", "append", "1"), strings.NewReader("x"))
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, err := mw.CreateFormFile("file", "up.txt")
	require.NoError(t, err)
	_, err = io.WriteString(fw, "x")
	require.NoError(t, err)
	require.NoError(t, mw.Close())
	resp = fileReq(t, ts, "POST", filesURL(filepath.Join(work, "m"), "session", "n"), &form, "Content-Type", mw.FormDataContentType())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	code, body = call(t, ts, http.MethodPost, "/make_dir", map[string]any{"path": filepath.Join(work, "d/e"), "session": "n"})
	require.Equal(t, true, body["success"], "%d %v", code, body)
	code, body = call(t, ts, http.MethodPost, "/write_file", map[string]any{"path": filepath.Join(work, "w"), "content": "x", "user": "nobody"})
	require.Equal(t, true, body["success"], "%d %v", code, body)
	for _, p := range []string{"a", "a/b", "a/b/f", "s", "s/f", "c", "c/g", "m", "m/up.txt", "d", "d/e", "w"} {
		assert.EqualValues(t, nobodyUID, uidOf(t, filepath.Join(work, p)), p)
	}

	// What nobody may not write: 403 on /files, the system's words on
	// the JSON operations.
	secret := filepath.Join(parent, "secret")
	require.NoError(t, os.WriteFile(secret, []byte("root's"), 0o600))
	for _, q := range [][]string{{"user", "nobody"}, {"session", "n"}} {
		resp = fileReq(t, ts, "PUT", filesURL(filepath.Join(parent, "x/f"), q...), strings.NewReader("x"))
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%v", q)
		resp = fileReq(t, ts, "PUT", filesURL(secret, q...), strings.NewReader("x"))
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%v", q)
		resp = fileReq(t, ts, "GET", filesURL(secret, q...), nil)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%v", q)
	}
	assert.NoDirExists(t, filepath.Join(parent, "x"))
	for _, op := range []string{"/write_file", "/read_file", "/delete_file"} {
		_, body = call(t, ts, http.MethodPost, op, map[string]any{"path": secret, "user": "nobody"})
		assert.Contains(t, body["error"], "permission denied", op)
	}
	got, err := os.ReadFile(secret)
	require.NoError(t, err)
	assert.Equal(t, "root's", string(got))

	// A user or a session that does not exist, as /run answers them.
	resp = fileReq(t, ts, "PUT", filesURL(filepath.Join(work, "u"), "user", "no-such-user-anywhere"), strings.NewReader("x"))
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, `unknown user: "no-such-user-anywhere"`, jsonReply(t, resp)["error"])
	code, _ = call(t, ts, http.MethodPost, "/stat_file", map[string]any{"path": work, "session": "nope"})
	assert.Equal(t, http.StatusNotFound, code)
	assert.NoFileExists(t, filepath.Join(work, "u"))
}

// An agent that is not root refuses user as /run refuses it.
func TestFilesUserNotRoot(t *testing.T) {
	runner := &executor.Runner{Privileged: func() bool { return false }}
	ts, _ := newTestServer(t, testServer{runner: runner})
	p := filepath.Join(t.TempDir(), "f")
	want := "running a command as another user needs an agent running as root"
	resp := fileReq(t, ts, "PUT", filesURL(p, "user", "nobody"), strings.NewReader("x"))
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Equal(t, want, jsonReply(t, resp)["error"])
	code, body := call(t, ts, http.MethodPost, "/write_file", map[string]any{"path": p, "user": "nobody"})
	assert.Equal(t, http.StatusForbidden, code)
	assert.Equal(t, want, body["error"])
	assert.NoFileExists(t, p)
}

// A client that sends the whole of a body over the limit before it reads
// anything (as a reverse proxy that buffers requests does) gets the 413,
// not a connection reset under its writes, and then a clean close.
func TestFilesRefusedBodySentFirst(t *testing.T) {
	ts, _ := newTestServer(t, testServer{cfg: Config{MaxUpload: 1 << 20}, runner: &executor.Runner{}})
	p := filepath.Join(t.TempDir(), "f")
	const size = 8 << 20
	c, br := dialFiles(t, ts)
	require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
	writeHead(t, c, "PUT", filesURL(p), "Content-Length", "8388608")
	chunk := make([]byte, 64<<10)
	for range size / len(chunk) {
		_, err := c.Write(chunk)
		require.NoError(t, err, "the agent reads the body it refused")
	}
	resp, body := readReply(t, br)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Equal(t, float64(1<<20), body["max_bytes"])
	assert.True(t, resp.Close, "Connection: close")
	_, err := br.ReadByte()
	assert.ErrorIs(t, err, io.EOF, "closed cleanly, not reset")
	assert.NoFileExists(t, p)
}

// An archive downloaded as a user is read with that user's rights: a file
// only root may read cuts it rather than going into it.
func TestFilesArchiveAsUser(t *testing.T) {
	work, _ := nobodyDir(t)
	ts, _ := newTestServer(t, testServer{})
	require.NoError(t, os.WriteFile(filepath.Join(work, "mine"), []byte("nobody's"), 0o644))
	require.NoError(t, os.Chown(filepath.Join(work, "mine"), nobodyUID, nobodyUID))
	require.NoError(t, os.WriteFile(filepath.Join(work, "secret"), []byte("TOPSECRET"), 0o600))

	get := func(q ...string) ([]byte, error) {
		resp := fileReq(t, ts, "GET", filesURL(work, append([]string{"format", "tar"}, q...)...), nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return io.ReadAll(resp.Body)
	}
	b, err := get()
	require.NoError(t, err)
	assert.Contains(t, string(b), "TOPSECRET", "as root, the whole tree")
	b, err = get("user", "nobody")
	assert.Error(t, err, "cut where nobody may not read")
	assert.NotContains(t, string(b), "TOPSECRET")
}

// An upload cut short leaves none of the folders it created, whether a
// PUT or a form.
func TestFilesCutUploadRemovesMadeDirs(t *testing.T) {
	ts, _ := newTestServer(t, testServer{runner: &executor.Runner{}})
	dir := t.TempDir()
	for _, tt := range []struct{ method, target, ctype string }{
		{"PUT", filesURL(filepath.Join(dir, "new/sub/f")), ""},
		{"POST", filesURL(filepath.Join(dir, "form/sub")), "multipart/form-data; boundary=b"},
	} {
		c, _ := dialFiles(t, ts)
		hdr := []string{"Content-Length", "10000000"}
		if tt.ctype != "" {
			hdr = append(hdr, "Content-Type", tt.ctype)
		}
		writeHead(t, c, tt.method, tt.target, hdr...)
		body := make([]byte, 1<<20)
		if tt.ctype != "" {
			body = append([]byte("--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\n"), body...)
		}
		_, err := c.Write(body)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			entries, _ := os.ReadDir(dir)
			return len(entries) == 1
		}, 10*time.Second, 5*time.Millisecond, "%s: the upload is under way", tt.method)
		require.NoError(t, c.Close())
		require.Eventually(t, func() bool {
			entries, _ := os.ReadDir(dir)
			return len(entries) == 0
		}, 10*time.Second, 5*time.Millisecond, "%s: the folders it made are gone", tt.method)
	}
}

// An archive unpacked with user (or a session) is unpacked with that
// user's rights: what it makes is theirs, where they may not write it is
// a 403 with nothing made, and a link another user planted is not
// followed by a root extraction either.
func TestFilesExtractAsUser(t *testing.T) {
	work, parent := nobodyDir(t)
	ts, _ := newTestServer(t, testServer{})
	code, body := call(t, ts, http.MethodPost, "/create_session", map[string]any{"id": "n", "user": "nobody", "cwd": work})
	require.Equal(t, http.StatusCreated, code, body)
	tarball := mkTarball(t, false, "d/", "", "d/f", "x", "l", "->d/f")

	for _, q := range [][]string{{"user", "nobody"}, {"session", "n"}} {
		dst := filepath.Join(work, q[0], "new")
		resp := fileReq(t, ts, "PUT", filesURL(dst, append([]string{"extract", "tar"}, q...)...), bytes.NewReader(tarball))
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%v: %v", q, jsonReply(t, resp))
		for _, p := range []string{q[0], q[0] + "/new", q[0] + "/new/d", q[0] + "/new/d/f", q[0] + "/new/l"} {
			assert.EqualValues(t, nobodyUID, uidOf(t, filepath.Join(work, p)), p)
		}
		// Into work itself, which is nobody's but whose parent is root's.
		resp = fileReq(t, ts, "PUT", filesURL(work, append([]string{"extract", "tar"}, q...)...), bytes.NewReader(tarball))
		require.Equal(t, http.StatusOK, resp.StatusCode, "%v: %v", q, jsonReply(t, resp))
		assert.EqualValues(t, nobodyUID, uidOf(t, filepath.Join(work, "d", "f")))

		resp = fileReq(t, ts, "PUT", filesURL(filepath.Join(parent, "x"), append([]string{"extract", "tar"}, q...)...), bytes.NewReader(tarball))
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%v", q)
		assert.NoDirExists(t, filepath.Join(parent, "x"))
	}

	rootOnly := filepath.Join(parent, "root-only")
	require.NoError(t, os.Mkdir(rootOnly, 0o700))
	cmd := exec.Command("ln", "-s", rootOnly, filepath.Join(work, "planted"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyUID, Gid: nobodyUID}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, dst := range []string{filepath.Join(work, "planted"), filepath.Join(work, "planted", "sub")} {
		resp := fileReq(t, ts, "PUT", filesURL(dst, "extract", "tar"), bytes.NewReader(tarball))
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, dst)
	}
	entries, err := os.ReadDir(rootOnly)
	require.NoError(t, err)
	assert.Empty(t, entries, "root wrote nothing through nobody's link")
}

package connlimit

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// listenerPair is a Listener on loopback, with the server side of the
// connections it accepts on a channel.
type listenerPair struct {
	l        *Listener
	accepted chan *Conn
}

func newListenerPair(t *testing.T, max int, timeout time.Duration) *listenerPair {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &listenerPair{l: NewListener(ln, max, timeout), accepted: make(chan *Conn, 16)}
	done := make(chan struct{})
	go func() { // the accept loop; it ends when the listener is closed
		defer close(done)
		for {
			c, err := p.l.Accept()
			if err != nil {
				return
			}
			p.accepted <- c.(*Conn)
		}
	}()
	t.Cleanup(func() {
		p.l.Close()
		<-done
		close(p.accepted)
		for c := range p.accepted {
			c.Close()
		}
	})
	return p
}

// dial connects a client.
func (p *listenerPair) dial(t *testing.T) net.Conn {
	t.Helper()
	client, err := net.DialTimeout("tcp", p.l.Addr().String(), 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	return client
}

// connect dials and returns both sides of the connection, once accepted.
func (p *listenerPair) connect(t *testing.T) (client net.Conn, server *Conn) {
	t.Helper()
	client = p.dial(t)
	select {
	case server = <-p.accepted:
		t.Cleanup(func() { server.Close() })
		return client, server
	case <-time.After(5 * time.Second):
		t.Fatal("the connection was not accepted within 5 s")
		return nil, nil
	}
}

func (p *listenerPair) open() int { return p.l.Open() }

// closedByServer reports whether the server closed client's connection,
// waiting at most 5 s.
func closedByServer(t *testing.T, client net.Conn) bool {
	require.NoError(t, client.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err := io.Copy(io.Discard, client)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// At the cap the oldest unauthenticated connection gives up its slot;
// authenticated ones keep theirs, and past them a new one is refused.
func TestListenerEvictsOldestUnauthenticated(t *testing.T) {
	p := newListenerPair(t, 2, time.Minute)
	c1, s1 := p.connect(t)
	c2, s2 := p.connect(t)
	assert.Equal(t, 2, p.open())

	_, s3 := p.connect(t)
	require.NotNil(t, s3)
	assert.True(t, closedByServer(t, c1), "the oldest unauthenticated was not evicted")
	assert.Equal(t, 2, p.open())
	s1.Close() // as the HTTP server does after the eviction: no second release
	assert.Equal(t, 2, p.open())

	s2.Authenticate()
	s3.Authenticate()
	c4 := p.dial(t)
	require.NoError(t, c4.SetReadDeadline(time.Now().Add(5*time.Second)))
	b, err := io.ReadAll(c4) // every slot is authenticated: refused
	require.NoError(t, err)
	assert.Contains(t, string(b), "503 Service Unavailable")
	assert.Equal(t, 2, p.open())

	s3.Close()
	assert.Equal(t, 1, p.open())
	p.connect(t)
	require.NoError(t, c2.SetReadDeadline(time.Now().Add(100*time.Millisecond)))
	_, err = c2.Read(make([]byte, 1))
	var ne net.Error
	assert.True(t, errors.As(err, &ne) && ne.Timeout(), "an authenticated connection was closed: %v", err)
}

// The wrapper keeps what the HTTP server and hijackers use the connection
// underneath for: ReadFrom (sendfile), CloseWrite, and the *net.TCPConn.
func TestConnForwardsReadFromAndUnwraps(t *testing.T) {
	p := newListenerPair(t, 4, time.Minute)
	client, s := p.connect(t)
	_, ok := s.NetConn().(*net.TCPConn)
	assert.True(t, ok, "NetConn is %T", s.NetConn())
	var _ io.ReaderFrom = s

	content := strings.Repeat("0123456789", 100_000)
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var got []byte
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the reader; it ends at EOF, which CloseWrite sends
		defer wg.Done()
		got, _ = io.ReadAll(client)
	}()
	n, err := s.ReadFrom(f)
	require.NoError(t, err)
	assert.Equal(t, int64(len(content)), n)
	require.NoError(t, s.CloseWrite())
	wg.Wait()
	assert.Equal(t, content, string(got))
}

// Until it authenticates, a connection's read deadlines are clamped;
// authenticating restores the deadline last asked for.
func TestConnClampsReadDeadlineUntilAuthenticated(t *testing.T) {
	p := newListenerPair(t, 4, 100*time.Millisecond)
	client, s := p.connect(t)
	require.NoError(t, s.SetReadDeadline(time.Time{}))
	_, err := s.Read(make([]byte, 1))
	assert.ErrorIs(t, err, os.ErrDeadlineExceeded)

	require.NoError(t, s.SetReadDeadline(time.Time{}))
	s.Authenticate()
	assert.True(t, s.Authenticated())
	done := make(chan error, 1)
	go func() { // the read; it ends when the client writes
		_, err := s.Read(make([]byte, 1))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the restored deadline still cut the read: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	_, err = client.Write([]byte("x"))
	require.NoError(t, err)
	assert.NoError(t, <-done)
}

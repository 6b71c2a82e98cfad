package relay

import (
	"context"
	"net"

	"github.com/coder/websocket"
)

// WebSocket returns c as a net.Conn whose bytes travel in binary messages
// (websocket.NetConn), for Join. ctx bounds its life, as NetConn's.
//
// Its Close sends the close frame before it cancels the pending read:
// NetConn's own Close cancels first, and a read cancelled while it waits
// makes the library drop the connection, so that the peer, whose last
// bytes may be in flight, sees it cut instead of closed (the close frame
// then often never leaves).
func WebSocket(ctx context.Context, c *websocket.Conn) net.Conn {
	return &wsConn{Conn: websocket.NetConn(ctx, c, websocket.MessageBinary), ws: c}
}

type wsConn struct {
	net.Conn
	ws *websocket.Conn
}

func (c *wsConn) Close() error {
	err := c.ws.Close(websocket.StatusNormalClosure, "")
	c.Conn.Close()
	return err
}

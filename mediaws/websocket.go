package mediaws

import (
	"context"
	"time"

	"github.com/coder/websocket"
)

// wsConn is a coder/websocket connection as a Conn.
type wsConn struct {
	c            *websocket.Conn
	writeTimeout time.Duration
}

// WebSocket makes c a Conn whose writes each take at most writeTimeout:
// a client that takes nothing for that long is cut.
func WebSocket(c *websocket.Conn, writeTimeout time.Duration) Conn {
	return wsConn{c: c, writeTimeout: writeTimeout}
}

func (w wsConn) Read(ctx context.Context) (bool, []byte, error) {
	typ, msg, err := w.c.Read(ctx)
	return typ == websocket.MessageBinary, msg, err
}

func (w wsConn) Write(ctx context.Context, binary bool, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, w.writeTimeout)
	defer cancel()
	typ := websocket.MessageText
	if binary {
		typ = websocket.MessageBinary
	}
	return w.c.Write(ctx, typ, msg)
}

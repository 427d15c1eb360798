package httpd

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestZZProbe(t *testing.T) {
	e := newEnv(t, envOpts{bodyTimeout: 300 * time.Millisecond})
	addr := strings.TrimPrefix(e.base, "http://")
	for _, req := range []string{
		"POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 10000\r\n\r\n",
		"POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n",
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(3 * time.Second))
		c.Write([]byte(req))
		t0 := time.Now()
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		t.Logf("first line %q %v after %v", line, err, time.Since(t0))
		_, err = io.ReadAll(br)
		t.Logf("closed: %v after %v", err, time.Since(t0))
		c.Close()
	}
}

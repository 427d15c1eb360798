package main

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestRespReader(t *testing.T) {
	tests := []struct {
		name      string
		raw       string
		status    int
		body      string
		close     bool
		wantErr   string // substring; "" = no error
		remaining string // bytes left for the next response
	}{
		{
			name:   "content-length",
			raw:    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 23\r\n\r\n" + baselineBody,
			status: 200, body: baselineBody,
		},
		{
			name:   "content-length case-insensitive, next response pipelined",
			raw:    "HTTP/1.1 200 OK\r\ncontent-length:  2 \r\n\r\nhiHTTP/1.1 204 No Content\r\n\r\n",
			status: 200, body: "hi", remaining: "HTTP/1.1 204 No Content\r\n\r\n",
		},
		{
			name: "chunked with extension and trailer",
			raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
				"5;ext=1\r\nhello\r\nA\r\n, chunked!\r\n0\r\nX-Trailer: yes\r\n\r\nNEXT",
			status: 200, body: "hello, chunked!", remaining: "NEXT",
		},
		{
			name:   "bad status is still a response",
			raw:    "HTTP/1.1 403 Forbidden\r\nContent-Length: 29\r\n\r\n{\"ok\":false,\"result\":{\"e\":1}}",
			status: 403, body: `{"ok":false,"result":{"e":1}}`,
		},
		{
			name:   "interim 100 skipped",
			raw:    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
			status: 200, body: "x",
		},
		{
			name:   "connection close",
			raw:    "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n",
			status: 200, close: true,
		},
		{
			name:   "body until EOF",
			raw:    "HTTP/1.0 200 OK\r\n\r\nall of it",
			status: 200, body: "all of it", close: true,
		},
		{name: "malformed status line", raw: "HTTP/1.1 2x0 OK\r\n\r\n", wantErr: "malformed status line"},
		{name: "not HTTP", raw: "SSH-2.0-OpenSSH\r\n\r\n", wantErr: "malformed status line"},
		{name: "truncated body", raw: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", wantErr: "unexpected EOF"},
		{name: "bad chunk size", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", wantErr: "bad chunk size"},
		{name: "chunk without CRLF", raw: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", wantErr: "not followed by CRLF"},
		{name: "conflicting lengths", raw: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", wantErr: "bad Content-Length"},
		{name: "header without colon", raw: "HTTP/1.1 200 OK\r\nbogus\r\n\r\n", wantErr: "malformed header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.NewReader(tt.raw)
			rr := newRespReader(src)
			resp, err := rr.read()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("read() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("read() error = %v", err)
			}
			if resp.Status != tt.status || string(resp.Body) != tt.body || resp.Close != tt.close {
				t.Errorf("read() = status %d body %q close %v, want %d %q %v",
					resp.Status, resp.Body, resp.Close, tt.status, tt.body, tt.close)
			}
			rest := make([]byte, 100)
			n, _ := rr.br.Read(rest)
			if got := string(rest[:n]); got != tt.remaining {
				t.Errorf("left unread %q, want %q", got, tt.remaining)
			}
		})
	}
}

func TestRespReaderClosedConnection(t *testing.T) {
	_, err := newRespReader(strings.NewReader("")).read()
	if !errors.Is(err, errConnClosed) {
		t.Fatalf("read() on empty stream = %v, want errConnClosed", err)
	}
}

func TestRespReaderKeepsBoundedBody(t *testing.T) {
	big := strings.Repeat("a", 3*maxKeptBody)
	raw := "HTTP/1.1 500 Oops\r\nContent-Length: " + strconv.Itoa(len(big)) + "\r\n\r\n" + big + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
	rr := newRespReader(strings.NewReader(raw))
	resp, err := rr.read()
	if err != nil || resp.Status != 500 || len(resp.Body) != maxKeptBody {
		t.Fatalf("first read() = %d, %d body bytes, %v; want 500, %d, nil", resp.Status, len(resp.Body), err, maxKeptBody)
	}
	resp, err = rr.read()
	if err != nil || resp.Status != 200 || len(resp.Body) != 0 {
		t.Fatalf("second read() = %d, %q, %v; want 200, empty, nil", resp.Status, resp.Body, err)
	}
}

func FuzzRespReader(f *testing.F) {
	f.Add("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
	f.Add("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n")
	f.Fuzz(func(t *testing.T, raw string) {
		rr := newRespReader(strings.NewReader(raw))
		for range 5 {
			resp, err := rr.read()
			if err != nil {
				return
			}
			if resp.Status < 200 || resp.Status > 999 || len(resp.Body) > maxKeptBody {
				t.Fatalf("implausible response %d with %d body bytes", resp.Status, len(resp.Body))
			}
		}
	})
}

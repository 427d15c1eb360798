// Package wheptest is a WHEP client for tests and benchmarks: a pion
// PeerConnection that receives the daemon's H.264 track and puts its
// RTP packets back together into access units.
package wheptest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/rtp/codecs"
	"github.com/pion/webrtc/v4"

	"kvmd/h264"
)

// Unit is an access unit received: Annex B, its key flag (an IDR slice in
// it), when its last packet came, and whether its packets carried the
// playout-delay extension at 0.
type Unit struct {
	Data        []byte
	Key         bool
	Arrived     time.Time
	PlayoutZero bool
}

// Client is one WHEP peer.
type Client struct {
	PC *webrtc.PeerConnection
	// Units are the access units received; one that cannot be put in
	// while the queue is full is dropped (counted in Dropped).
	Units   chan Unit
	Dropped atomic.Int64
	// Location is the session's URL from the answer (Post's).
	Location string

	ssrc    atomic.Uint32
	closed  chan struct{}
	once    sync.Once
	state   chan webrtc.PeerConnectionState
	playout atomic.Uint32 // the playout-delay extension's id, 0 if not negotiated
}

// Signal sends an offer and returns the answer and the session's URL.
type Signal func(ctx context.Context, offer string) (answer, location string, err error)

// Dial offers to receive H.264 and waits for the connection.
func Dial(ctx context.Context, signal Signal) (*Client, error) {
	m := &webrtc.MediaEngine{}
	if err := m.RegisterDefaultCodecs(); err != nil {
		return nil, err
	}
	if err := m.RegisterHeaderExtension(webrtc.RTPHeaderExtensionCapability{URI: "http://www.webrtc.org/experiments/rtp-hdrext/playout-delay"}, webrtc.RTPCodecTypeVideo); err != nil {
		return nil, err
	}
	api := webrtc.NewAPI(webrtc.WithMediaEngine(m))
	pc, err := api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		return nil, err
	}
	c := &Client{PC: pc, Units: make(chan Unit, 256), closed: make(chan struct{}), state: make(chan webrtc.PeerConnectionState, 16)}
	fail := func(err error) (*Client, error) {
		pc.Close()
		return nil, err
	}
	if _, err := pc.AddTransceiverFromKind(webrtc.RTPCodecTypeVideo, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
		return fail(err)
	}
	pc.OnConnectionStateChange(func(s webrtc.PeerConnectionState) {
		select {
		case c.state <- s:
		default:
		}
	})
	pc.OnTrack(func(tr *webrtc.TrackRemote, recv *webrtc.RTPReceiver) {
		c.ssrc.Store(uint32(tr.SSRC()))
		for _, e := range recv.GetParameters().HeaderExtensions {
			if e.URI == "http://www.webrtc.org/experiments/rtp-hdrext/playout-delay" {
				c.playout.Store(uint32(e.ID))
			}
		}
		go c.read(tr)
		go func() { // the receiver's RTCP must be read for the interceptors to run
			for {
				if _, _, err := recv.ReadRTCP(); err != nil {
					return
				}
			}
		}()
	})
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		return fail(err)
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(offer); err != nil {
		return fail(err)
	}
	select {
	case <-gathered:
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	answer, loc, err := signal(ctx, pc.LocalDescription().SDP)
	if err != nil {
		return fail(err)
	}
	c.Location = loc
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: answer}); err != nil {
		return fail(err)
	}
	for {
		select {
		case s := <-c.state:
			switch s {
			case webrtc.PeerConnectionStateConnected:
				return c, nil
			case webrtc.PeerConnectionStateFailed, webrtc.PeerConnectionStateClosed:
				return fail(fmt.Errorf("wheptest: the connection %s", s))
			}
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
}

// read puts the track's packets together: a unit ends with the packet
// that has the marker bit. A gap in the sequence numbers drops the unit
// and the units after it until a key unit, and asks for one.
func (c *Client) read(tr *webrtc.TrackRemote) {
	var (
		pkt      codecs.H264Packet
		cur      []byte
		lastSeq  uint16
		haveSeq  bool
		broken   bool
		zero     = true
		needKey  = true
		buf      = make([]byte, 1500)
		playoutP rtp.PlayoutDelayExtension
	)
	for {
		n, _, err := tr.Read(buf)
		if err != nil {
			return
		}
		var p rtp.Packet
		if err := p.Unmarshal(buf[:n]); err != nil {
			continue
		}
		if haveSeq && p.SequenceNumber != lastSeq+1 {
			broken = true
		}
		lastSeq, haveSeq = p.SequenceNumber, true
		if id := uint8(c.playout.Load()); id != 0 {
			ext := p.GetExtension(id)
			if ext == nil || playoutP.Unmarshal(ext) != nil || playoutP.MinDelay != 0 || playoutP.MaxDelay != 0 {
				zero = false
			}
		} else {
			zero = false
		}
		nals, err := pkt.Unmarshal(p.Payload)
		if err == nil && len(nals) > 0 {
			cur = append(cur, nals...)
		}
		if !p.Marker {
			continue
		}
		u := Unit{Data: cur, Key: h264.HasType(cur, h264.NALIDR), Arrived: time.Now(), PlayoutZero: zero}
		cur, zero = nil, true
		if broken {
			broken, needKey = false, true
			c.RequestKey()
			continue
		}
		if needKey && !u.Key {
			continue
		}
		needKey = false
		select {
		case c.Units <- u:
		default:
			c.Dropped.Add(1)
		}
	}
}

// RequestKey sends a picture-loss report.
func (c *Client) RequestKey() error {
	ssrc := c.ssrc.Load()
	if ssrc == 0 {
		return errors.New("wheptest: no track yet")
	}
	return c.PC.WriteRTCP([]rtcp.Packet{&rtcp.PictureLossIndication{MediaSSRC: ssrc}})
}

// Next waits for the next unit.
func (c *Client) Next(ctx context.Context) (Unit, error) {
	select {
	case u := <-c.Units:
		return u, nil
	case <-ctx.Done():
		return Unit{}, ctx.Err()
	}
}

// Close closes the PeerConnection (not the session: Delete does).
func (c *Client) Close() error {
	var err error
	c.once.Do(func() {
		close(c.closed)
		err = c.PC.Close()
	})
	return err
}

// Post is a Signal over HTTP: POST the offer to url (application/sdp)
// with header, and take a 201 with the answer and a Location.
func Post(hc *http.Client, url string, header http.Header) Signal {
	return func(ctx context.Context, offer string) (string, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(offer))
		if err != nil {
			return "", "", err
		}
		for k, v := range header {
			req.Header[k] = v
		}
		req.Header.Set("Content-Type", "application/sdp")
		resp, err := hc.Do(req)
		if err != nil {
			return "", "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode != http.StatusCreated {
			return "", "", &StatusError{Status: resp.StatusCode, Body: string(body)}
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/sdp") {
			return "", "", fmt.Errorf("wheptest: answer of type %q", ct)
		}
		return string(body), resp.Header.Get("Location"), nil
	}
}

// StatusError is a WHEP answer other than 201.
type StatusError struct {
	Status int
	Body   string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("wheptest: HTTP %d: %s", e.Status, bytes.TrimSpace([]byte(e.Body)))
}

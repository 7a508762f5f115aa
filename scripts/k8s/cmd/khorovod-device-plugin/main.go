// Command khorovod-device-plugin advertises simulated GPUs to a kubelet
// through the kubelet's device-plugin API (k8s.io/kubelet's
// deviceplugin/v1beta1), the path NVIDIA's device plugin takes on a real GPU
// node. The test node (scripts/real-node.sh) runs it so that pods asking for
// nvidia.com/gpu are scheduled, counted and handed device IDs for real.
//
//   - It registers the resource (default nvidia.com/gpu) with the kubelet's
//     Registration service and serves DevicePlugin on a socket of its own in
//     the kubelet's device-plugins directory; when the kubelet restarts (and
//     removes that socket) it serves and registers again.
//   - ListAndWatch advertises --count devices named <--id-prefix><i>
//     (GPU-sim-0, GPU-sim-1, ...) and sends the list again whenever a device's
//     health changes.
//   - Allocate hands each container what NVIDIA's plugin hands it with its
//     default (envvar) strategy: NVIDIA_VISIBLE_DEVICES, the allocated IDs
//     joined by commas. There is no device node to mount.
//   - Health on demand: --health-file lists the IDs of devices to report
//     Unhealthy, one per line ('#' starts a comment); it is read every
//     --poll. A missing file means every device is healthy.
//
// One goroutine per ListAndWatch stream; the device state is guarded by a
// mutex and streams learn of changes from a channel closed on each change.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type options struct {
	pluginDir  string
	resource   string
	count      int
	idPrefix   string
	healthFile string
	poll       time.Duration
}

func parseOptions() (options, error) {
	var o options
	flag.StringVar(&o.pluginDir, "plugin-dir", pluginapi.DevicePluginPath, "the kubelet's device-plugins directory (holds kubelet.sock)")
	flag.StringVar(&o.resource, "resource", "nvidia.com/gpu", "extended resource name to advertise")
	flag.IntVar(&o.count, "count", 4, "number of simulated devices")
	flag.StringVar(&o.idPrefix, "id-prefix", "GPU-sim-", "device IDs are this prefix and the device's index")
	flag.StringVar(&o.healthFile, "health-file", "", "file listing the IDs of Unhealthy devices, one per line")
	flag.DurationVar(&o.poll, "poll", 500*time.Millisecond, "how often the health file and the plugin socket are checked")
	flag.Parse()
	if flag.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", flag.Args())
	}
	if o.count < 0 || o.count > 1024 {
		return o, fmt.Errorf("--count must lie in [0, 1024], not %d", o.count)
	}
	if !strings.Contains(o.resource, "/") {
		return o, fmt.Errorf("--resource must be a domain-qualified extended resource name (vendor/name), not %q", o.resource)
	}
	if o.poll <= 0 {
		return o, errors.New("--poll must be positive")
	}
	return o, nil
}

// devices is the advertised device list and its health.
type devices struct {
	mu        sync.Mutex
	ids       []string
	unhealthy map[string]bool
	changed   chan struct{} // closed and replaced on every change
}

func newDevices(o options) *devices {
	d := &devices{unhealthy: map[string]bool{}, changed: make(chan struct{})}
	for i := 0; i < o.count; i++ {
		d.ids = append(d.ids, fmt.Sprintf("%s%d", o.idPrefix, i))
	}
	return d
}

// snapshot returns the list to send and the channel that closes on the next change.
func (d *devices) snapshot() ([]*pluginapi.Device, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	list := make([]*pluginapi.Device, 0, len(d.ids))
	for _, id := range d.ids {
		health := pluginapi.Healthy
		if d.unhealthy[id] {
			health = pluginapi.Unhealthy
		}
		list = append(list, &pluginapi.Device{ID: id, Health: health})
	}
	return list, d.changed
}

func (d *devices) known(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, k := range d.ids {
		if k == id {
			return true
		}
	}
	return false
}

// setUnhealthy replaces the Unhealthy set; it reports whether anything changed.
func (d *devices) setUnhealthy(ids map[string]bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	next := map[string]bool{}
	for _, id := range d.ids {
		if ids[id] {
			next[id] = true
		}
	}
	if fmt.Sprint(sortedKeys(next)) == fmt.Sprint(sortedKeys(d.unhealthy)) {
		return false
	}
	d.unhealthy = next
	close(d.changed)
	d.changed = make(chan struct{})
	return true
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// readHealthFile returns the IDs the file lists; a missing file lists none.
func readHealthFile(path string) (map[string]bool, error) {
	ids := map[string]bool{}
	if path == "" {
		return ids, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ids, nil
	}
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			ids[line] = true
		}
	}
	return ids, nil
}

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	devs *devices
	stop <-chan struct{}
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	for {
		list, changed := p.devs.snapshot()
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: list}); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-p.stop:
			return nil
		case <-stream.Context().Done():
			return nil
		}
	}
}

func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		for _, id := range c.DevicesIds {
			if !p.devs.known(id) {
				return nil, fmt.Errorf("unknown device %q", id)
			}
		}
		log.Printf("allocate %s", strings.Join(c.DevicesIds, ","))
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(c.DevicesIds, ",")},
		})
	}
	return resp, nil
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// serve listens on the plugin's socket and registers it with the kubelet.
// The returned server is stopped by the caller.
func serve(o options, devs *devices, stop <-chan struct{}, socket string) (*grpc.Server, error) {
	_ = os.Remove(socket)
	listener, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", socket, err)
	}
	server := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(server, &plugin{devs: devs, stop: stop})
	go func() { _ = server.Serve(listener) }()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+filepath.Join(o.pluginDir, "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		server.Stop()
		return nil, fmt.Errorf("connecting to the kubelet: %w", err)
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     filepath.Base(socket),
		ResourceName: o.resource,
		Options:      &pluginapi.DevicePluginOptions{},
	})
	if err != nil {
		server.Stop()
		return nil, fmt.Errorf("registering with the kubelet: %w", err)
	}
	return server, nil
}

func run(o options) error {
	devs := newDevices(o)
	socket := filepath.Join(o.pluginDir, "khorovod-"+strings.ReplaceAll(o.resource, "/", "_")+".sock")
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	var server *grpc.Server
	var serverStop chan struct{}
	shutdown := func() {
		if server != nil {
			close(serverStop)
			server.Stop()
			server = nil
		}
	}
	defer shutdown()
	ticker := time.NewTicker(o.poll)
	defer ticker.Stop()
	for {
		if ids, err := readHealthFile(o.healthFile); err != nil {
			log.Printf("health file: %v", err)
		} else if devs.setUnhealthy(ids) {
			log.Printf("unhealthy devices: %v", sortedKeys(ids))
		}
		// The kubelet removes every plugin socket when it starts: serve and
		// register again whenever ours is gone.
		if _, err := os.Stat(socket); server == nil || err != nil {
			shutdown()
			serverStop = make(chan struct{})
			s, err := serve(o, devs, serverStop, socket)
			if err != nil {
				log.Printf("%v (retrying)", err)
			} else {
				server = s
				log.Printf("registered %d %s device(s) on %s", o.count, o.resource, socket)
			}
		}
		select {
		case sig := <-signals:
			log.Printf("%v: stopping", sig)
			return nil
		case <-ticker.C:
		}
	}
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("khorovod-device-plugin: ")
	o, err := parseOptions()
	if err != nil {
		fmt.Fprintln(os.Stderr, "khorovod-device-plugin:", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		log.Fatal(err)
	}
}

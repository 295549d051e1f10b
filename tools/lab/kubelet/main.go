// lab-kubelet stands in for the kubelet and the container runtime on a lab machine, so
// that real kubeadm, kube-apiserver, kube-controller-manager, kube-scheduler and etcd
// binaries run there as they would on a VM:
//
//   - static pods: every manifest in --manifests (written by kubeadm) is run as a process
//     from its container command and args, restarted with back-off when it exits, and
//     restarted when the manifest changes; removed manifests stop their process;
//   - /healthz on 127.0.0.1:10248, which `kubeadm init/join` waits for;
//   - TLS bootstrap: with only bootstrap-kubelet.conf present (kubeadm join), it requests
//     a client certificate through a CertificateSigningRequest (approved and signed by
//     kube-controller-manager) and writes kubelet.conf, as the kubelet does;
//   - the Node object: registered as system:node:<name>, with the Ready condition and the
//     node Lease renewed every 10 s while this machine lives (so a dead machine's Node
//     goes NotReady through the node lifecycle controller, for real);
//   - mirror pods: every static pod gets its mirror Pod (<name>-<node>, annotated
//     kubernetes.io/config.mirror), which kubeadm reads, e.g. etcd's client URLs on join;
//   - pods bound to the node "run": they are reported Running and Ready, and pods being
//     deleted are confirmed gone, so eviction, PodDisruptionBudgets and drain complete.
//
// It runs no containers: a pod's containers are never executed (except static pods).
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509/pkix"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
	"sigs.k8s.io/yaml"
)

type options struct {
	nodeName, nodeIP, version     string
	manifests, logDir, healthz    string
	kubeconfig, bootstrap, pkiDir string
	heartbeat                     time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.nodeName, "node-name", "", "name of this node (required)")
	flag.StringVar(&o.nodeIP, "node-ip", "", "InternalIP of this node (required)")
	flag.StringVar(&o.version, "kubelet-version", "", "version reported in the Node's nodeInfo (required)")
	flag.StringVar(&o.manifests, "manifests", "/etc/kubernetes/manifests", "static pod manifests")
	flag.StringVar(&o.logDir, "log-dir", "/var/log/molt", "where static pod output goes")
	flag.StringVar(&o.healthz, "healthz", "127.0.0.1:10248", "healthz listen address")
	flag.StringVar(&o.kubeconfig, "kubeconfig", "/etc/kubernetes/kubelet.conf", "the node's kubeconfig")
	flag.StringVar(&o.bootstrap, "bootstrap-kubeconfig", "/etc/kubernetes/bootstrap-kubelet.conf", "bootstrap kubeconfig for TLS bootstrap")
	flag.StringVar(&o.pkiDir, "pki-dir", "/var/lib/kubelet/pki", "where the bootstrapped client certificate goes")
	flag.DurationVar(&o.heartbeat, "heartbeat", 10*time.Second, "Node status and Lease renewal interval")
	flag.Parse()
	if o.nodeName == "" || o.nodeIP == "" || o.version == "" {
		fmt.Fprintln(os.Stderr, "lab-kubelet: --node-name, --node-ip and --kubelet-version are required")
		os.Exit(2)
	}
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()

	go serveHealthz(o.healthz)
	pods := newStaticPods(o)
	go pods.run(ctx)
	go nodeAgent(ctx, o, pods)
	<-ctx.Done()
	pods.stopAll()
}

func serveHealthz(addr string) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	log.Fatal((&http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}).ListenAndServe())
}

// ---------------------------------------------------------------- static pods

type staticPod struct {
	hash    string
	cmd     *exec.Cmd
	stop    chan struct{}
	stopped chan struct{}
}

type staticPods struct {
	o    options
	mu   sync.Mutex
	pods map[string]*staticPod
	// The manifests being run, for mirror pods; changed is signalled on every change.
	specs   map[string]*corev1.Pod
	changed chan struct{}
}

func newStaticPods(o options) *staticPods {
	return &staticPods{o: o, pods: map[string]*staticPod{}, specs: map[string]*corev1.Pod{}, changed: make(chan struct{}, 1)}
}

// current returns the running static pods' manifests and their hashes.
func (s *staticPods) current() (map[string]*corev1.Pod, map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	specs, hashes := map[string]*corev1.Pod{}, map[string]string{}
	for name, p := range s.pods {
		specs[name] = s.specs[name]
		hashes[name] = p.hash
	}
	return specs, hashes
}

// run reconciles the running processes with the manifest directory; the kubelet, too,
// re-reads its static pod path periodically (fileCheckFrequency).
func (s *staticPods) run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		s.reconcile()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *staticPods) reconcile() {
	want := map[string]struct {
		hash string
		pod  *corev1.Pod
	}{}
	entries, _ := os.ReadDir(s.o.manifests)
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") || !(strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(s.o.manifests, e.Name()))
		if err != nil {
			continue
		}
		var pod corev1.Pod
		if err := yaml.Unmarshal(data, &pod); err != nil || len(pod.Spec.Containers) == 0 {
			log.Printf("static pod %s: not a pod manifest: %v", e.Name(), err)
			continue
		}
		sum := sha256.Sum256(data)
		want[pod.Name] = struct {
			hash string
			pod  *corev1.Pod
		}{hex.EncodeToString(sum[:]), &pod}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for name, p := range s.pods {
		if w, ok := want[name]; !ok || w.hash != p.hash {
			log.Printf("static pod %s: manifest removed or changed; stopping", name)
			p.halt()
			delete(s.pods, name)
			delete(s.specs, name)
			changed = true
		}
	}
	for name, w := range want {
		if _, ok := s.pods[name]; !ok {
			p := &staticPod{hash: w.hash, stop: make(chan struct{}), stopped: make(chan struct{})}
			s.pods[name] = p
			s.specs[name] = w.pod
			go p.supervise(name, w.pod.Spec.Containers[0], s.o.logDir)
			changed = true
		}
	}
	if changed {
		select {
		case s.changed <- struct{}{}:
		default:
		}
	}
}

func (s *staticPods) stopAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pods {
		p.halt()
	}
}

// supervise runs the container's command until stopped, restarting it with the
// kubelet's CrashLoopBackOff shape (doubling from 1 s, capped at 10 s here).
func (p *staticPod) supervise(name string, c corev1.Container, logDir string) {
	defer close(p.stopped)
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(argv) == 0 {
		log.Printf("static pod %s: container %s has no command", name, c.Name)
		return
	}
	backoff := time.Second
	for {
		out, err := os.OpenFile(filepath.Join(logDir, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
		if err != nil {
			log.Printf("static pod %s: %v", name, err)
			return
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = out, out
		cmd.Env = os.Environ()
		for _, e := range c.Env {
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		started := time.Now()
		if err := cmd.Start(); err != nil {
			log.Printf("static pod %s: start: %v", name, err)
		} else {
			log.Printf("static pod %s: started pid %d", name, cmd.Process.Pid)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				log.Printf("static pod %s: exited: %v", name, err)
			case <-p.stop:
				terminate(cmd, done)
				out.Close()
				return
			}
		}
		out.Close()
		if time.Since(started) > time.Minute {
			backoff = time.Second
		}
		select {
		case <-p.stop:
			return
		case <-time.After(backoff):
		}
		if backoff < 10*time.Second {
			backoff *= 2
		}
	}
}

// terminate sends SIGTERM to the process group and SIGKILL after the grace period.
func terminate(cmd *exec.Cmd, done chan error) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

func (p *staticPod) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.stopped
}

// ---------------------------------------------------------------- node agent

func nodeAgent(ctx context.Context, o options, static *staticPods) {
	client := connect(ctx, o)
	if client == nil {
		return
	}
	log.Printf("node agent: connected as %s", o.nodeName)
	go podAgent(ctx, o, client)
	for {
		// A failed heartbeat (the Node not registered yet, say) is retried within a second,
		// as the kubelet retries its registration, not one heartbeat period later.
		next := o.heartbeat
		node, err := heartbeat(ctx, o, client)
		if err != nil {
			log.Printf("node agent: heartbeat: %v", err)
			next = min(next, time.Second)
		} else if err := syncMirrors(ctx, o, client, node, static); err != nil {
			log.Printf("node agent: mirror pods: %v", err)
			next = min(next, time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		case <-static.changed:
		}
	}
}

const mirrorAnnotation = "kubernetes.io/config.mirror"

// syncMirrors makes the node's mirror pods match its static pods, as the kubelet does.
func syncMirrors(ctx context.Context, o options, c *kubernetes.Clientset, node *corev1.Node, static *staticPods) error {
	specs, hashes := static.current()
	want := map[string]string{} // "namespace/name" -> hash
	for name, spec := range specs {
		ns := spec.Namespace
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		want[ns+"/"+name+"-"+o.nodeName] = hashes[name]
	}
	existing, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", o.nodeName).String()})
	if err != nil {
		return err
	}
	have := map[string]string{}
	for _, p := range existing.Items {
		if h, ok := p.Annotations[mirrorAnnotation]; ok {
			key := p.Namespace + "/" + p.Name
			if want[key] != h {
				zero := int64(0)
				if err := c.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
					return err
				}
				continue
			}
			have[key] = h
		}
	}
	for name, spec := range specs {
		ns := spec.Namespace
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		if _, ok := have[ns+"/"+name+"-"+o.nodeName]; ok {
			continue
		}
		m := spec.DeepCopy()
		m.ObjectMeta = metav1.ObjectMeta{
			Name:      name + "-" + o.nodeName,
			Namespace: ns,
			Labels:    spec.Labels,
			Annotations: map[string]string{
				mirrorAnnotation:              hashes[name],
				"kubernetes.io/config.hash":   hashes[name],
				"kubernetes.io/config.source": "file",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr(true)}},
		}
		for k, v := range spec.Annotations {
			m.Annotations[k] = v
		}
		m.Spec.NodeName = o.nodeName
		m.Status = corev1.PodStatus{}
		if _, err := c.CoreV1().Pods(ns).Create(ctx, m, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("mirror pod %s: %w", m.Name, err)
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// connect returns the node's client once it has one. The kubelet is (re)started by kubeadm
// the moment kubeadm writes its kubeconfig, and on a joining control-plane node its API server
// is the static pod this process has just started: so the files are looked for every 100 ms
// (a stat) and the API server is asked again every 250 ms, not on a growing back-off that
// would add seconds after both are there.
func connect(ctx context.Context, o options) *kubernetes.Clientset {
	last := ""
	for {
		var c *kubernetes.Clientset
		err := errNoKubeconfig
		if haveKubeconfig(o) {
			c, err = clientFor(ctx, o)
		}
		if err == nil {
			return c
		}
		if msg := err.Error(); msg != last {
			log.Printf("connect to the API server: %v (retrying)", err)
			last = msg
		}
		every := 250 * time.Millisecond
		if err == errNoKubeconfig {
			every = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

var errNoKubeconfig = fmt.Errorf("neither kubelet.conf nor bootstrap-kubelet.conf exists yet")

func haveKubeconfig(o options) bool {
	for _, f := range []string{o.kubeconfig, o.bootstrap} {
		if _, err := os.Stat(f); err == nil {
			return true
		}
	}
	return false
}

// clientFor returns a client with the node's own identity: kubelet.conf if present, else
// a certificate obtained through TLS bootstrap with bootstrap-kubelet.conf.
func clientFor(ctx context.Context, o options) (*kubernetes.Clientset, error) {
	if _, err := os.Stat(o.kubeconfig); err == nil {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
		if err != nil {
			return nil, err
		}
		return kubernetes.NewForConfig(cfg)
	}
	if _, err := os.Stat(o.bootstrap); err != nil {
		return nil, fmt.Errorf("neither %s nor %s exists yet", o.kubeconfig, o.bootstrap)
	}
	if err := tlsBootstrap(ctx, o); err != nil {
		return nil, fmt.Errorf("TLS bootstrap: %w", err)
	}
	return clientFor(ctx, o)
}

func tlsBootstrap(ctx context.Context, o options) error {
	bootCfg, err := clientcmd.BuildConfigFromFlags("", o.bootstrap)
	if err != nil {
		return err
	}
	bootClient, err := kubernetes.NewForConfig(bootCfg)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	csrPEM, err := cert.MakeCSR(key, &pkix.Name{CommonName: "system:node:" + o.nodeName, Organization: []string{"system:nodes"}}, nil, nil)
	if err != nil {
		return err
	}
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	name, uid, err := csr.RequestCertificateWithContext(ctx, bootClient, csrPEM, "", certificatesv1.KubeAPIServerClientKubeletSignerName, nil, usages, key)
	if err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	crt, err := csr.WaitForCertificate(waitCtx, bootClient, name, uid)
	if err != nil {
		return err
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.pkiDir, 0o700); err != nil {
		return err
	}
	pemPath := filepath.Join(o.pkiDir, "kubelet-client-current.pem")
	if err := writeAtomic(pemPath, append(append([]byte{}, crt...), keyPEM...), 0o600); err != nil {
		return err
	}
	raw, err := clientcmd.LoadFromFile(o.bootstrap)
	if err != nil {
		return err
	}
	cluster := raw.Clusters[raw.Contexts[raw.CurrentContext].Cluster]
	kc := clientcmdapi.NewConfig()
	kc.Clusters["default-cluster"] = cluster
	kc.AuthInfos["default-auth"] = &clientcmdapi.AuthInfo{ClientCertificate: pemPath, ClientKey: pemPath}
	kc.Contexts["default-context"] = &clientcmdapi.Context{Cluster: "default-cluster", AuthInfo: "default-auth", Namespace: "default"}
	kc.CurrentContext = "default-context"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	log.Printf("TLS bootstrap: certificate %s issued; writing %s", name, o.kubeconfig)
	return writeAtomic(o.kubeconfig, data, 0o600)
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func nodeConditions(now metav1.Time) []corev1.NodeCondition {
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "lab-kubelet has sufficient memory available"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "lab-kubelet has no disk pressure"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "lab-kubelet has sufficient PID available"),
		cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "lab-kubelet is posting ready status"),
	}
}

func heartbeat(ctx context.Context, o options, c *kubernetes.Clientset) (*corev1.Node, error) {
	now := metav1.Now()
	nodes := c.CoreV1().Nodes()
	node, err := nodes.Get(ctx, o.nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err = nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: o.nodeName,
			Labels: map[string]string{
				"kubernetes.io/hostname": o.nodeName,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		}}, metav1.CreateOptions{})
		if err == nil {
			log.Printf("node agent: registered Node %s", o.nodeName)
		}
	}
	if err != nil {
		return nil, err
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node.Status.Capacity = capacity
	node.Status.Allocatable = capacity
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: o.nodeIP}, {Type: corev1.NodeHostName, Address: o.nodeName}}
	node.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: o.version, OperatingSystem: "linux", Architecture: "amd64", ContainerRuntimeVersion: "lab://0", OSImage: osImage()}
	conds := nodeConditions(now)
	for i, c := range conds {
		for _, old := range node.Status.Conditions {
			if old.Type == c.Type && old.Status == c.Status {
				conds[i].LastTransitionTime = old.LastTransitionTime
			}
		}
	}
	node.Status.Conditions = conds
	updated, err := nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("node status: %w", err)
	}
	return updated, renewLease(ctx, o, c, updated)
}

func osImage() string {
	data, _ := os.ReadFile("/etc/os-release")
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "unknown"
}

func renewLease(ctx context.Context, o options, c *kubernetes.Clientset, node *corev1.Node) error {
	leases := c.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	duration := int32(40)
	lease, err := leases.Get(ctx, o.nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: o.nodeName, OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &o.nodeName, LeaseDurationSeconds: &duration, RenewTime: &now},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime = &o.nodeName, &duration, &now
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

// ---------------------------------------------------------------- pods on this node

func podAgent(ctx context.Context, o options, c *kubernetes.Clientset) {
	factory := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", o.nodeName).String()
	}))
	work := make(chan string, 1024)
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			select {
			case work <- key:
			default:
			}
		}
	}
	inf := factory.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, n any) { enqueue(n) }})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	for {
		select {
		case <-ctx.Done():
			return
		case key := <-work:
			obj, exists, err := inf.GetStore().GetByKey(key)
			if err != nil || !exists {
				continue
			}
			if err := syncPod(ctx, o, c, obj.(*corev1.Pod)); err != nil {
				log.Printf("pod %s: %v", key, err)
				go func() {
					select {
					case <-ctx.Done():
					case <-time.After(2 * time.Second):
						enqueue(obj)
					}
				}()
			}
		}
	}
}

func syncPod(ctx context.Context, o options, c *kubernetes.Clientset, pod *corev1.Pod) error {
	pods := c.CoreV1().Pods(pod.Namespace)
	if pod.DeletionTimestamp != nil {
		// The containers "stopped" at once: confirm the deletion, as the kubelet does.
		zero := int64(0)
		err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	if pod.Status.Phase == corev1.PodRunning && podReady(pod) {
		return nil
	}
	now := metav1.Now()
	p := pod.DeepCopy()
	p.Status.Phase = corev1.PodRunning
	p.Status.HostIP = o.nodeIP
	p.Status.HostIPs = []corev1.HostIP{{IP: o.nodeIP}}
	ip := o.nodeIP
	if !pod.Spec.HostNetwork {
		ip = podIP(o.nodeIP, string(pod.UID))
	}
	p.Status.PodIP = ip
	p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	if p.Status.StartTime == nil {
		p.Status.StartTime = &now
	}
	p.Status.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodScheduled, corev1.ContainersReady, corev1.PodReady} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	p.Status.ContainerStatuses = nil
	started := true
	for _, ct := range pod.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: ct.Name, Image: ct.Image, ImageID: "lab://" + ct.Image, ContainerID: "lab://" + string(pod.UID) + "/" + ct.Name,
			Ready: true, Started: &started, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	sort.Slice(p.Status.ContainerStatuses, func(i, j int) bool { return p.Status.ContainerStatuses[i].Name < p.Status.ContainerStatuses[j].Name })
	_, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podIP gives each pod a stable address in 10.244.<node>.<pod>/16 (no traffic flows).
func podIP(nodeIP, uid string) string {
	n := net.ParseIP(nodeIP).To4()
	sum := sha256.Sum256([]byte(uid))
	if n == nil {
		return "10.244.0.2"
	}
	return fmt.Sprintf("10.244.%d.%d", n[3], 2+int(sum[0])%250)
}

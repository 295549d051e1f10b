// Install-or-verify of the node runtime (containerd, kubelet, kubeadm, kubectl) at the
// node's exact Kubernetes version, plus the kernel settings kubeadm's preflight demands
// and containerd's sandbox (pause) image aligned with the one kubeadm deploys.
// First it waits for first boot to finish (cloud-init, then the distribution's own apt
// runs), so it never races them. From the image: verify only, and say precisely what is
// wrong. From packages: install the pinned versions (apt or dnf), hold them, and do
// nothing when already there; on RHEL-family systems, refuse what it cannot set up.
import type { SemVer } from "semver";
import { DEFAULT_PACKAGE_REPOSITORY, type KubeadmBootstrapSettings } from "./settings";

/** How long first boot (cloud-init) may take, and how long a package manager lock is waited for. */
export const FIRST_BOOT_TIMEOUT_SECONDS = 600;
export const PACKAGE_LOCK_TIMEOUT_SECONDS = 600;

export function installConstants(
  settings: Pick<KubeadmBootstrapSettings, "install" | "imageRepository">,
  version: SemVer,
): Record<string, string> {
  const install = settings.install;
  return {
    K8S_VERSION: version.version,
    K8S_MINOR: `v${version.major}.${version.minor}`,
    INSTALL_SOURCE: install.source,
    PACKAGE_REPOSITORY:
      install.source === "packages" ? (install.repository ?? DEFAULT_PACKAGE_REPOSITORY).replace(/\/+$/, "") : "",
    IMAGE_REPOSITORY: settings.imageRepository ?? "",
    FIRST_BOOT_TIMEOUT: String(FIRST_BOOT_TIMEOUT_SECONDS),
    LOCK_TIMEOUT: String(PACKAGE_LOCK_TIMEOUT_SECONDS),
  };
}

export const INSTALL_FUNCTIONS: readonly string[] = [
  `wait_for_first_boot() {
  local rc=0
  if command -v cloud-init >/dev/null 2>&1; then
    log "waiting for cloud-init to finish first boot (at most \${FIRST_BOOT_TIMEOUT}s)"
    timeout "$FIRST_BOOT_TIMEOUT" cloud-init status --wait >/dev/null 2>&1 || rc=$?
    case "$rc" in
      0 | 2) ;; # 2: done, with recoverable errors (cloud-init >= 23.4)
      124)
        log "cloud-init did not finish first boot within \${FIRST_BOOT_TIMEOUT}s (cloud-init status --long tells why)"
        return 1
        ;;
      *)
        log "cloud-init failed first boot (exit $rc): see /var/log/cloud-init.log and /var/log/cloud-init-output.log"
        return 1
        ;;
    esac
  fi
  # The distribution's own package runs (apt-daily, unattended-upgrades) start with boot too.
  local deadline=$((SECONDS + LOCK_TIMEOUT))
  while systemctl is-active --quiet apt-daily.service apt-daily-upgrade.service 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "apt-daily / unattended-upgrades still running after \${LOCK_TIMEOUT}s: not installing over it"
      return 1
    fi
    sleep 2
  done
}
`,
  `installed_versions_match() {
  command -v containerd >/dev/null 2>&1 || return 1
  command -v kubeadm >/dev/null 2>&1 || return 1
  command -v kubelet >/dev/null 2>&1 || return 1
  command -v kubectl >/dev/null 2>&1 || return 1
  [ "$(kubeadm version -o short 2>/dev/null)" = "v$K8S_VERSION" ] || return 1
  [ "$(kubelet --version 2>/dev/null)" = "Kubernetes v$K8S_VERSION" ] || return 1
  [ "$(kubectl_version)" = "v$K8S_VERSION" ] || return 1
}
`,
  `kubectl_version() {
  kubectl version --client -o json 2>/dev/null | sed -n 's/^ *"gitVersion": *"\\([^"]*\\)".*/\\1/p' | head -n 1
}
`,
  `describe_installed() {
  local c a l k
  c=$(containerd --version 2>/dev/null || echo missing)
  a=$(kubeadm version -o short 2>/dev/null || echo missing)
  l=$(kubelet --version 2>/dev/null || echo missing)
  k=$(kubectl_version)
  printf 'containerd: %s; kubeadm: %s; kubelet: %s; kubectl: %s' "$c" "$a" "$l" "\${k:-missing}"
}
`,
  `apt_get() {
  apt-get -o DPkg::Lock::Timeout="$LOCK_TIMEOUT" "$@"
}
`,
  `install_packages_apt() {
  export DEBIAN_FRONTEND=noninteractive
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends ca-certificates curl gpg containerd >/dev/null
  install -d -m 0755 /etc/apt/keyrings
  curl -fsSL "$PACKAGE_REPOSITORY/$K8S_MINOR/deb/Release.key" |
    gpg --dearmor --batch --yes -o /etc/apt/keyrings/kubernetes-apt-keyring.gpg
  printf 'deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] %s/%s/deb/ /\\n' \\
    "$PACKAGE_REPOSITORY" "$K8S_MINOR" >/etc/apt/sources.list.d/kubernetes.list
  apt_get update -qq
  apt-mark unhold kubelet kubeadm kubectl >/dev/null 2>&1 || true
  apt_get install -y -qq --allow-downgrades --allow-change-held-packages \\
    "kubelet=$K8S_VERSION-*" "kubeadm=$K8S_VERSION-*" "kubectl=$K8S_VERSION-*" >/dev/null
  apt-mark hold kubelet kubeadm kubectl >/dev/null
}
`,
  `refuse_rhel_policies() {
  if command -v getenforce >/dev/null 2>&1 && [ "$(getenforce)" = Enforcing ]; then
    log "SELinux is enforcing: kubeadm's control-plane static pods need it permissive" \\
      "(setenforce 0 and SELINUX=permissive in /etc/selinux/config, as kubeadm's install guide says)" \\
      "or a policy you maintain; set that in the image, then run again"
    return 1
  fi
  if systemctl is-active --quiet firewalld 2>/dev/null; then
    log "firewalld is active: it drops the API (6443), etcd (2379-2380), kubelet (10250)," \\
      "controller (10257, 10259) and network add-on traffic between nodes; open them in the image" \\
      "or disable firewalld (the cloud's security groups filter instead), then run again"
    return 1
  fi
}
`,
  `containerd_package_dnf() {
  local p
  for p in containerd containerd.io; do
    if rpm -q "$p" >/dev/null 2>&1 || dnf -q list --available "$p" >/dev/null 2>&1; then
      echo "$p"
      return 0
    fi
  done
  return 1
}
`,
  `install_packages_dnf() {
  refuse_rhel_policies
  local runtime
  if ! runtime=$(containerd_package_dnf); then
    log "no containerd package in this system's repositories (RHEL, Rocky and Alma ship none):" \\
      "add the containerd.io repository (download.docker.com) to the image," \\
      "or bake containerd in and use install.source=image"
    return 1
  fi
  printf '%s\\n' \\
    '[kubernetes]' \\
    'name=Kubernetes' \\
    "baseurl=$PACKAGE_REPOSITORY/$K8S_MINOR/rpm/" \\
    'enabled=1' \\
    'gpgcheck=1' \\
    "gpgkey=$PACKAGE_REPOSITORY/$K8S_MINOR/rpm/repodata/repomd.xml.key" \\
    'exclude=kubelet kubeadm kubectl cri-tools kubernetes-cni' >/etc/yum.repos.d/kubernetes.repo
  # dnf waits for the rpm lock itself; timeout bounds that wait.
  timeout "$LOCK_TIMEOUT" dnf install -y -q "$runtime" >/dev/null
  timeout "$LOCK_TIMEOUT" dnf install -y -q --disableexcludes=kubernetes \\
    "kubelet-$K8S_VERSION" "kubeadm-$K8S_VERSION" "kubectl-$K8S_VERSION" >/dev/null
}
`,
  `kubeadm_pause_image() {
  local args=(config images list --kubernetes-version "v$K8S_VERSION")
  if [ -n "$IMAGE_REPOSITORY" ]; then
    args+=(--image-repository "$IMAGE_REPOSITORY")
  fi
  kubeadm "\${args[@]}" 2>/dev/null | grep -E '/pause:' | head -n 1
}
`,
  // containerd 1.x names the sandbox image in sandbox_image under the CRI plugin; 2.x in
  // pinned_images.sandbox. Both are set to kubeadm's; a config naming neither is refused.
  `align_containerd_config() {
  local in=$1 out=$2 pause=$3
  sed -E -e 's/SystemdCgroup = false/SystemdCgroup = true/' \\
    -e "s|^([[:space:]]*sandbox_image[[:space:]]*=[[:space:]]*).*|\\1\\"$pause\\"|" \\
    -e "s|^([[:space:]]*sandbox[[:space:]]*=[[:space:]]*).*|\\1'$pause'|" "$in" >"$out"
  if ! grep -Eq "^[[:space:]]*(sandbox_image|sandbox)[[:space:]]*=[[:space:]]*[\\"']\${pause}[\\"']" "$out"; then
    log "containerd's config.toml names no sandbox image to align with kubeadm's $pause;" \\
      "add sandbox_image (containerd 1.x) or pinned_images.sandbox (2.x) to it in the image"
    return 1
  fi
}
`,
  `configure_containerd() {
  local pause current=/etc/containerd/config.toml new=/etc/containerd/config.toml.molt
  pause=$(kubeadm_pause_image)
  if [ -z "$pause" ]; then
    log "kubeadm $K8S_VERSION names no pause image (kubeadm config images list):" \\
      "cannot align containerd's sandbox image"
    return 1
  fi
  install -d -m 0755 /etc/containerd
  if [ ! -s "$current" ]; then
    containerd config default >"$current"
  fi
  if ! align_containerd_config "$current" "$new" "$pause"; then
    rm -f "$new"
    return 1
  fi
  if cmp -s "$new" "$current"; then
    rm -f "$new"
  else
    log "containerd: systemd cgroups, sandbox image $pause"
    mv "$new" "$current"
    systemctl restart containerd
  fi
}
`,
  `configure_kernel() {
  printf '%s\\n' overlay br_netfilter >/etc/modules-load.d/molt-kubernetes.conf
  modprobe overlay
  modprobe br_netfilter
  printf '%s\\n' 'net.bridge.bridge-nf-call-iptables = 1' 'net.bridge.bridge-nf-call-ip6tables = 1' \\
    'net.ipv4.ip_forward = 1' \\
    >/etc/sysctl.d/99-molt-kubernetes.conf
  sysctl --system >/dev/null
  swapoff -a
  sed -i '/[[:space:]]swap[[:space:]]/ s/^[^#]/#&/' /etc/fstab
}
`,
  `install_or_verify_runtime() {
  wait_for_first_boot
  if installed_versions_match; then
    log "containerd, kubelet, kubeadm and kubectl $K8S_VERSION present"
  elif [ "$INSTALL_SOURCE" = image ]; then
    log "the image does not carry Kubernetes $K8S_VERSION ($(describe_installed));" \\
      "rebuild the image or set install.source=packages"
    return 1
  elif command -v apt-get >/dev/null 2>&1; then
    log "installing containerd, kubelet, kubeadm, kubectl $K8S_VERSION (apt, $PACKAGE_REPOSITORY)"
    install_packages_apt
  elif command -v dnf >/dev/null 2>&1; then
    log "installing containerd, kubelet, kubeadm, kubectl $K8S_VERSION (dnf, $PACKAGE_REPOSITORY)"
    install_packages_dnf
  else
    log "neither apt-get nor dnf found: cannot install Kubernetes packages here; use install.source=image"
    return 1
  fi
  if ! installed_versions_match; then
    log "after installation the versions still differ from $K8S_VERSION ($(describe_installed))"
    return 1
  fi
  configure_kernel
  configure_containerd
  systemctl enable --now containerd >/dev/null
  systemctl enable kubelet >/dev/null
}
`,
];

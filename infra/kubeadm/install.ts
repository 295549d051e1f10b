// Install-or-verify of the node runtime (containerd, kubelet, kubeadm, kubectl) at the
// node's exact Kubernetes version, plus the kernel settings kubeadm's preflight demands.
// From the image: verify only, and say precisely what is wrong. From packages: install
// the pinned versions (apt or dnf), hold them, and do nothing when already there.
import type { SemVer } from "semver";
import { DEFAULT_PACKAGE_REPOSITORY, type InstallSource } from "./settings";

export function installConstants(install: InstallSource, version: SemVer): Record<string, string> {
  return {
    K8S_VERSION: version.version,
    K8S_MINOR: `v${version.major}.${version.minor}`,
    INSTALL_SOURCE: install.source,
    PACKAGE_REPOSITORY:
      install.source === "packages" ? (install.repository ?? DEFAULT_PACKAGE_REPOSITORY).replace(/\/+$/, "") : "",
  };
}

export const INSTALL_FUNCTIONS: readonly string[] = [
  `installed_versions_match() {
  command -v containerd >/dev/null 2>&1 || return 1
  command -v kubeadm >/dev/null 2>&1 || return 1
  command -v kubelet >/dev/null 2>&1 || return 1
  [ "$(kubeadm version -o short 2>/dev/null)" = "v$K8S_VERSION" ] || return 1
  [ "$(kubelet --version 2>/dev/null)" = "Kubernetes v$K8S_VERSION" ] || return 1
}
`,
  `describe_installed() {
  local c a l
  c=$(containerd --version 2>/dev/null || echo missing)
  a=$(kubeadm version -o short 2>/dev/null || echo missing)
  l=$(kubelet --version 2>/dev/null || echo missing)
  printf 'containerd: %s; kubeadm: %s; kubelet: %s' "$c" "$a" "$l"
}
`,
  `install_packages_apt() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends ca-certificates curl gpg containerd >/dev/null
  install -d -m 0755 /etc/apt/keyrings
  curl -fsSL "$PACKAGE_REPOSITORY/$K8S_MINOR/deb/Release.key" | gpg --dearmor --batch --yes -o /etc/apt/keyrings/kubernetes-apt-keyring.gpg
  printf 'deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] %s/%s/deb/ /\\n' "$PACKAGE_REPOSITORY" "$K8S_MINOR" >/etc/apt/sources.list.d/kubernetes.list
  apt-get update -qq
  apt-mark unhold kubelet kubeadm kubectl >/dev/null 2>&1 || true
  apt-get install -y -qq --allow-downgrades --allow-change-held-packages \\
    "kubelet=$K8S_VERSION-*" "kubeadm=$K8S_VERSION-*" "kubectl=$K8S_VERSION-*" >/dev/null
  apt-mark hold kubelet kubeadm kubectl >/dev/null
}
`,
  `install_packages_dnf() {
  printf '%s\\n' \\
    '[kubernetes]' \\
    'name=Kubernetes' \\
    "baseurl=$PACKAGE_REPOSITORY/$K8S_MINOR/rpm/" \\
    'enabled=1' \\
    'gpgcheck=1' \\
    "gpgkey=$PACKAGE_REPOSITORY/$K8S_MINOR/rpm/repodata/repomd.xml.key" \\
    'exclude=kubelet kubeadm kubectl cri-tools kubernetes-cni' >/etc/yum.repos.d/kubernetes.repo
  dnf install -y -q containerd >/dev/null
  dnf install -y -q --disableexcludes=kubernetes \\
    "kubelet-$K8S_VERSION" "kubeadm-$K8S_VERSION" "kubectl-$K8S_VERSION" >/dev/null
}
`,
  `configure_containerd() {
  install -d -m 0755 /etc/containerd
  if [ ! -s /etc/containerd/config.toml ] || ! grep -q 'SystemdCgroup = true' /etc/containerd/config.toml; then
    containerd config default | sed 's/SystemdCgroup = false/SystemdCgroup = true/' >/etc/containerd/config.toml.molt
    mv /etc/containerd/config.toml.molt /etc/containerd/config.toml
    systemctl restart containerd
  fi
}
`,
  `configure_kernel() {
  printf '%s\\n' overlay br_netfilter >/etc/modules-load.d/molt-kubernetes.conf
  modprobe overlay
  modprobe br_netfilter
  printf '%s\\n' 'net.bridge.bridge-nf-call-iptables = 1' 'net.bridge.bridge-nf-call-ip6tables = 1' 'net.ipv4.ip_forward = 1' \\
    >/etc/sysctl.d/99-molt-kubernetes.conf
  sysctl --system >/dev/null
  swapoff -a
  sed -i '/[[:space:]]swap[[:space:]]/ s/^[^#]/#&/' /etc/fstab
}
`,
  `install_or_verify_runtime() {
  if installed_versions_match; then
    log "containerd, kubelet and kubeadm $K8S_VERSION present"
  elif [ "$INSTALL_SOURCE" = image ]; then
    log "the image does not carry Kubernetes $K8S_VERSION ($(describe_installed)); rebuild the image or set install.source=packages"
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

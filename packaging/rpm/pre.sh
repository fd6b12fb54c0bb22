# magnetar.rpm %pre: the service account exists before files owned by it
# are laid down. $1 is 1 on install, 2 on upgrade.
getent group magnetar >/dev/null || groupadd --system magnetar
getent passwd magnetar >/dev/null || useradd --system --gid magnetar --home-dir /var/lib/magnetar \
  --no-create-home --shell /sbin/nologin --comment "Magnetar message broker" magnetar
exit 0

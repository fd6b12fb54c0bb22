# magnetar.rpm %post: the data directory, then the unit's preset on a first
# install (what %systemd_post does: enabled only where the distribution's
# preset policy says so). Without systemd (containers) only the directory.
if [ ! -d /var/lib/magnetar ]; then
  mkdir -p /var/lib/magnetar
  chmod 0750 /var/lib/magnetar
fi
chown magnetar:magnetar /var/lib/magnetar
if [ "$1" -eq 1 ] && command -v systemctl >/dev/null 2>&1; then
  systemctl --no-reload preset magnetar.service >/dev/null 2>&1 || :
fi
exit 0

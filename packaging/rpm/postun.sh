# magnetar.rpm %postun: after an upgrade ($1 >= 1) restart a running service
# on the new binary (what %systemd_postun_with_restart does). Erase keeps
# /var/lib/magnetar, the account and an edited config (saved as .rpmsave).
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || :
  if [ "$1" -ge 1 ]; then
    systemctl try-restart magnetar.service >/dev/null 2>&1 || :
  fi
fi
exit 0

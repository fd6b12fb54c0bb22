# magnetar.rpm %preun: on erase ($1 = 0) disable and stop the service; an
# upgrade ($1 = 1) leaves it running until %postun restarts it.
if [ "$1" -eq 0 ] && command -v systemctl >/dev/null 2>&1; then
  systemctl --no-reload disable --now magnetar.service >/dev/null 2>&1 || :
fi
exit 0

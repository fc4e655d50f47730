#!/bin/sh
set -e
# The agent starts in the image's /opt/data, with the image's environment.
[ "$(pwd)" = /opt/data ]
echo "$EVALBOX_IMAGE" > answer.txt
printf '#!/bin/sh\necho hello\n' > /bin/greet
chmod +x /bin/greet

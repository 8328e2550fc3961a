# Fair scheduling (issue 28): the id of the run-queue message that claimed the run

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0006_run_agent'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='task_id',
            field=models.CharField(blank=True, default='', max_length=255),
        ),
    ]
